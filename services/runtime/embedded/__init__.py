"""The embedded runtime: the SQLite log (``store``), its runners (``runner``), the simulator's bus (``bus``)
and processor snapshots as data (``snapshot``)."""
