"""The applications on the runtimes: the simulator and its adversaries, ``demo``, ``monitor-eval``,
``settle``, ``ingest``, ``alerts`` and the generators of docs/games.md's tables and ``schemas/``."""
