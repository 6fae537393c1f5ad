"""The command line contract of docs/cli.md: shapes, errors and exit statuses."""

from __future__ import annotations

import io
import json

import pytest

from services.cli import main
from services.core.baccarat import VARIANTS, get_variant, resolve
from services.core.cards import parse_cards


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_deal_prints_the_contract_shape(capsys: pytest.CaptureFixture[str]) -> None:
    """`deal` prints one JSON object with variant, hands (cards, total), outcome, natural, cards_used."""
    code, out, _ = run(capsys, "deal", "--variant", "punto_banco", "--cards", "9S KH 2D 3C 4H 5S")
    assert code == 0
    got = json.loads(out)
    assert set(got) >= {"variant", "hands", "outcome", "natural", "cards_used"}
    assert got["hands"]["player"] == {"cards": ["9S", "2D", "4H"], "total": 5}
    assert got["hands"]["banker"] == {"cards": ["KH", "3C", "5S"], "total": 8}
    assert (got["outcome"], got["natural"], got["cards_used"]) == ("banker", False, 6)


def test_deal_batch_writes_one_line_per_input(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`deal --batch` reads one card list per line and writes one JSON line each, equal to the engine."""
    lines = ["9S KH 2D 3C 4H 5S", "8S 9H KD QC", "10H 4D 3S 2C 7H 7D"]
    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(lines) + "\n"))
    code, out, _ = run(capsys, "deal", "--variant", "punto_banco", "--batch")
    assert code == 0
    config = get_variant("punto_banco").config()
    got = [json.loads(line) for line in out.splitlines()]
    assert got == [resolve(config, parse_cards(line)).to_dict() for line in lines]


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["deal", "--variant", "punto_banco", "--cards", "9S KH 2D 1C"], "1C"),
        (["deal", "--variant", "nope", "--cards", "9S KH 2D 3C"], "nope"),
        (["deal", "--variant", "punto_banco", "--cards", "9S KH 2D"], "too_few_cards"),
        (["odds", "--variant", "russian_classic", "--decks", "2"], "enumerate"),
        (["odds", "--variant", "punto_banco", "--decks", "11"], "decks"),
    ],
)
def test_bad_input_is_one_line_on_stderr_and_status_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], needle: str
) -> None:
    """Unknown card, unknown variant, too few cards, impossible odds: one clear stderr line, exit 2."""
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert out == ""
    assert len(err.strip().splitlines()) == 1
    assert needle in err


def test_odds_json_has_the_contract_shape(capsys: pytest.CaptureFixture[str]) -> None:
    """`odds --json` gives variant, decks, total, outcomes (count, probability) and bets per spot."""
    code, out, _ = run(capsys, "odds", "--variant", "punto_banco", "--decks", "8", "--json")
    assert code == 0
    got = json.loads(out)
    assert (got["variant"], got["decks"]) == ("punto_banco", 8)
    assert sum(o["count"] for o in got["outcomes"].values()) == got["total"]
    assert set(got["outcomes"]) == {"banker", "player", "tie"}
    for spot in ("banker", "player", "tie"):
        assert set(got["bets"][spot]) >= {"probability_win", "house_edge"}


def test_odds_text_fits_80_columns_with_every_word_whole(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`odds` text at 80 columns: no line wider (its header and notes ran to 105 columns), and the same
    words in the same order as at 1,000 columns, so no figure is cut."""

    def text(columns: int) -> str:
        monkeypatch.setenv("COLUMNS", str(columns))
        code, out, err = run(capsys, "odds", "--variant", "punto_banco")
        assert code == 0, err
        return out

    narrow, wide = text(80), text(1000)
    assert max(map(len, wide.splitlines())) > 80, "the odds text has long lines to wrap"
    assert max(map(len, narrow.splitlines())) <= 80, narrow
    assert narrow.split() == wide.split()


def test_every_variant_deals_from_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    """Every registered variant resolves a coup from a card list (decisions by its default strategy)."""
    ranks = ["2", "3", "4", "5", "6", "7", "K", "Q", "9", "8"]  # a shoe order one deck can hold
    cards = " ".join(r + "SHDC"[(i + k) % 4] for k in range(3) for i, r in enumerate(ranks))
    for variant in VARIANTS:
        code, out, err = run(capsys, "deal", "--variant", variant, "--cards", cards)
        assert code == 0, (variant, err)
        assert json.loads(out)["variant"] == variant
