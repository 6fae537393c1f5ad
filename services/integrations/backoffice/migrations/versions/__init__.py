"""The migration scripts, one per schema change, in order."""
