"""The generators of what the repository ships: docs/games.md's tables, ``schemas/`` and the layout blocks
of the docs."""
