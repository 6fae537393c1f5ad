"""casino-ledger: an event-sourced ledger service for baccarat tables."""
