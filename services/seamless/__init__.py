"""The seamless wallet (docs/integration.md): the adapter stage, its HTTP shell, the reference operator wallet
and the reconciliation report."""
