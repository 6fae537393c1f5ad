"""The pure core: rules engine, money, ledger and processor logic.

Nothing here reads a clock, draws randomness, does I/O or logs; every function is a deterministic
function of its arguments, so that a replay years later runs the very code that ran in production.
"""
