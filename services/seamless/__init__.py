"""The seamless wallet (DESIGN §10): the adapter stage, its HTTP shell, the reference operator wallet
and the reconciliation report."""
