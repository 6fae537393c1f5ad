"""The shells: the embedded runtime (``embedded/``), the Kafka runtime (``kafka/``), the intake of records
(``intake``), the composition root, settings, keyring, failures, logging, and the replay."""
