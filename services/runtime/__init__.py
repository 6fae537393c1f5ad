"""The shells: embedded SQLite runtime, Kafka/faust glue, simulator, demo, replay, settings."""
