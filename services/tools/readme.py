"""The generated parts of docs/games.md: each variant's settings table and the ``settle`` examples.

``python -m services.tools.readme`` rewrites them in ``docs/games.md`` between their markers; tests check
that the doc and the code agree (the tables equal the variants' declarations, and every example's
printed answer is what ``casino-ledger settle`` prints).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from services.core.baccarat import VARIANTS
from services.core.baccarat.settings import settings_table
from services.simulation.dispute import render, settle_text

README = Path(__file__).resolve().parents[2] / "docs" / "games.md"
"""The document that holds the generated parts (the README once did; the name stayed)."""

SETTINGS_BEGIN, SETTINGS_END = "<!-- settings:begin -->", "<!-- settings:end -->"
EXAMPLES_BEGIN, EXAMPLES_END = "<!-- settle-examples:begin -->", "<!-- settle-examples:end -->"

EXAMPLES: dict[str, dict[str, Any]] = {
    "punto_banco": {
        "variant": "punto_banco",
        "cards": ["7S", "KH", "QD", "7C"],
        "bets": [
            {"bet_id": "a-tie", "account_id": "player:alice", "spot": "tie", "stake_minor": 7500},
            {"bet_id": "a-player", "account_id": "player:alice", "spot": "player", "stake_minor": 2500},
            {"bet_id": "b-banker", "account_id": "player:bob", "spot": "banker", "stake_minor": 1000},
        ],
    },
    "ez_baccarat": {
        "variant": "ez_baccarat",
        "cards": ["2S", "3H", "TD", "KC", "5S", "4D"],
        "bets": [
            {"bet_id": "a-tie", "account_id": "player:alice", "spot": "tie", "stake_minor": 7500},
            {"bet_id": "a-player", "account_id": "player:alice", "spot": "player", "stake_minor": 2500},
            {"bet_id": "b-banker", "account_id": "player:bob", "spot": "banker", "stake_minor": 1000},
            {"bet_id": "b-dragon", "account_id": "player:bob", "spot": "dragon_7", "stake_minor": 100},
        ],
    },
    "super6": {
        "variant": "super6",
        "config": {"tie_pays": 9},
        "cards": ["2S", "4H", "3D", "2C", "KS"],
        "bets": [
            {"bet_id": "a-tie", "account_id": "player:alice", "spot": "tie", "stake_minor": 7500},
            {"bet_id": "a-player", "account_id": "player:alice", "spot": "player", "stake_minor": 2500},
            {"bet_id": "b-banker", "account_id": "player:bob", "spot": "banker", "stake_minor": 1001},
        ],
    },
    "chemin_de_fer": {
        "variant": "chemin_de_fer",
        "cards": ["3S", "3H", "2D", "KC", "9C"],
        "decisions": [{"hand": "player", "choice": "draw"}, {"hand": "banker", "choice": "stand"}],
        "bets": [
            {"bet_id": "bank", "account_id": "player:carol", "spot": "bank", "stake_minor": 10000},
            {"bet_id": "a-player", "account_id": "player:alice", "spot": "player", "stake_minor": 7500},
            {"bet_id": "b-player", "account_id": "player:bob", "spot": "player", "stake_minor": 2500},
        ],
    },
    "baccarat_banque": {
        "variant": "baccarat_banque",
        "cards": ["3S", "6H", "KD", "2C", "7D", "TC", "8S", "9H"],
        "decisions": [{"hand": "right", "choice": "stand"}, {"hand": "banker", "choice": "draw"}],
        "bets": [
            {"bet_id": "bank", "account_id": "player:carol", "spot": "bank", "stake_minor": 10000},
            {"bet_id": "a-right", "account_id": "player:alice", "spot": "right", "stake_minor": 7500},
            {"bet_id": "a-left", "account_id": "player:alice", "spot": "left", "stake_minor": 2500},
        ],
    },
    "french_club": {
        "variant": "french_club",
        "cards": ["4S", "KH", "3D", "QC", "2H", "5S"],
        "bets": [
            {"bet_id": "bank", "account_id": "player:carol", "spot": "bank", "stake_minor": 10000},
            {"bet_id": "cover", "account_id": "player:carol", "spot": "bank_cover", "stake_minor": 20000},
            {"bet_id": "a-tie", "account_id": "player:alice", "spot": "tie", "stake_minor": 7500},
            {"bet_id": "a-ponte", "account_id": "player:alice", "spot": "ponte", "stake_minor": 2500},
            {"bet_id": "b-banker", "account_id": "player:bob", "spot": "banker", "stake_minor": 10000},
            {"bet_id": "d-tie", "account_id": "player:dan", "spot": "tie", "stake_minor": 10001},
        ],
    },
    "russian_classic": {
        "variant": "russian_classic",
        "config": {"punters": 2},
        "cards": ["7S", "4H", "KD", "5C", "2S", "9H", "5D"],
        "decisions": [
            {"hand": "punter_2", "choice": "stand"},
            {"hand": "punter_1", "choice": "stand"},
            {"hand": "banker", "choice": "draw"},
        ],
        "bets": [
            {"bet_id": "bank", "account_id": "player:carol", "spot": "bank", "stake_minor": 10000},
            {"bet_id": "a-1", "account_id": "player:alice", "spot": "punter_1", "stake_minor": 7500},
            {"bet_id": "b-2", "account_id": "player:bob", "spot": "punter_2", "stake_minor": 2500},
        ],
    },
}


def settings_markdown() -> str:
    """Every variant's table of settings (allowed values, default, source), in registry order."""
    parts = []
    for variant in VARIANTS.values():
        parts.append(f"**`{variant.id}`**\n\n{settings_table(variant.settings())}")
    return "\n\n".join(parts)


def example_block(data: dict[str, Any]) -> str:
    """One example as the doc shows it: the command with its input, then what it prints."""
    text = json.dumps(data, ensure_ascii=False)
    answer = render(settle_text(text))
    return f"```sh\n$ casino-ledger settle <<'EOF'\n{text}\nEOF\n{answer}\n```"


def examples_markdown() -> str:
    """Every ``settle`` example, one per game."""
    return "\n\n".join(f"**`{name}`**\n\n{example_block(data)}" for name, data in EXAMPLES.items())


def _between(text: str, begin: str, end: str, body: str) -> str:
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{begin}\n{body}\n{end}{tail}"


def section(text: str, begin: str, end: str) -> str:
    """What ``text`` holds between the markers ``begin`` and ``end`` (stripped)."""
    return text.split(begin, 1)[1].split(end, 1)[0].strip()


def main() -> int:
    """Rewrite the generated parts of docs/games.md."""
    text = README.read_text(encoding="utf-8")
    text = _between(text, SETTINGS_BEGIN, SETTINGS_END, settings_markdown())
    text = _between(text, EXAMPLES_BEGIN, EXAMPLES_END, examples_markdown())
    README.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
