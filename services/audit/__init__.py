"""Audit: independent re-derivation of every coup and payout, and tamper evidence."""
