"""The Kafka runtime: the faust worker (``worker``), plain topic reading and writing (``topic_io``), the
workers' metrics and probes (``metrics``) and the simulator's bus over a broker (``bus``)."""
