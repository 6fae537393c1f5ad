"""The embedded runtime: the SQLite log, its runners and bus (``log``) and processor snapshots as data
(``snapshot``)."""
