"""The seamless wallet (docs/integration.md): the HTTP client of the operator's wallet, its caller shells
(embedded and Kafka), the reference operator wallet and the reconciliation report. The adapter stage
itself is settlement's (``settlement/seamless_stage.py``)."""
