"""Fraud and anomaly monitoring."""
