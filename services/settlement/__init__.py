"""Settlement: the payout stage (per table) and the wallet stage (per account), internal or the seamless
adapter in front of the operator's wallet."""
