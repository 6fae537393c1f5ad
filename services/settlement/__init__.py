"""Settlement: the payout stage (per table) and the wallet stage (per account)."""
