"""The command line (DESIGN §6): a contract that scripts and people rely on.

Errors are one line on stderr and a non-zero exit (2 for bad input); JSON goes to stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from services.core.errors import DomainError

EXIT_BAD_INPUT = 2


def _fail(message: str) -> int:
    print(f"casino-ledger: error: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT


def cmd_deal(args: argparse.Namespace) -> int:
    """Resolve one coup (or one per stdin line with --batch) from a given card order."""
    from services.core.baccarat import get_variant, resolve  # noqa: PLC0415 (keeps --help fast)
    from services.core.baccarat.variants.punto_banco import TwoHandGame  # noqa: PLC0415
    from services.core.cards import parse_cards  # noqa: PLC0415

    try:
        variant = get_variant(args.variant)
        config = variant.config(decks=args.decks) if args.decks else variant.config()
        strategy = variant.strategies().get(args.strategy) if args.strategy else None
        if args.strategy and strategy is None:
            known = list(variant.strategies())
            return _fail(f"{args.variant} has no strategy {args.strategy!r} (known: {known})")
        default = getattr(variant, "default_strategy", None)
        if strategy is None and default:
            strategy = variant.strategies()[default]
    except DomainError as exc:
        return _fail(str(exc))
    # forced tableaux take the engine's fast path (same result, tested): --batch of 100k lines in seconds
    fast = variant.play if isinstance(variant, TwoHandGame) and variant.forced() else None
    lines = sys.stdin if args.batch else [args.cards or ""]
    out = sys.stdout
    for lineno, line in enumerate(lines, 1):
        if args.batch and not line.strip():
            continue
        try:
            cards = parse_cards(line)
            result = fast(cards) if fast else resolve(config, cards, strategy=strategy)
        except DomainError as exc:
            where = f"line {lineno}: " if args.batch else ""
            return _fail(f"{where}{exc}")
        out.write(json.dumps(result.to_dict(), separators=(",", ":") if args.batch else (", ", ": ")) + "\n")
    return 0


def cmd_odds(args: argparse.Namespace) -> int:
    """Exact probabilities and house edge of every bet, by full enumeration."""
    from services.core.baccarat import odds  # noqa: PLC0415

    try:
        if args.json:
            print(json.dumps(odds.odds_report(args.variant, args.decks), indent=2))
        else:
            print(odds.odds_text(args.variant, args.decks))
    except DomainError as exc:
        return _fail(str(exc))
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """The main job on the embedded default."""
    from services.runtime import demo  # noqa: PLC0415

    return demo.main(args)


def cmd_export(args: argparse.Namespace) -> int:
    """Every event of the log, one envelope per line, in log order."""
    from services.runtime import replay  # noqa: PLC0415

    return replay.export_main(args)


def cmd_replay(args: argparse.Namespace) -> int:
    """The regulatory replay: re-derives everything, prints a report and a digest."""
    from services.runtime import replay  # noqa: PLC0415

    return replay.replay_main(args)


def cmd_worker(args: argparse.Namespace) -> int:
    """A Kafka stream processor (faust worker)."""
    from services.runtime import kafka  # noqa: PLC0415

    run: Any = kafka.worker_main
    result: int = run(args)
    return result


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every sub-command."""
    p = argparse.ArgumentParser(prog="casino-ledger", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)

    d = sub.add_parser("demo", help="run the main job on the embedded SQLite log")
    d.add_argument("--tables", type=int, default=None)
    d.add_argument("--coups", type=int, default=None)
    d.add_argument("--seed", type=int, default=2026)
    d.add_argument("--db", default=None, help="SQLite log path (default: a new file under ./var/)")
    d.add_argument("--kafka", default=None, help="drive the session through Kafka at HOST:PORT")
    d.add_argument("--quiet", action="store_true")
    d.set_defaults(func=cmd_demo)

    de = sub.add_parser("deal", help="resolve one coup from a given card order")
    de.add_argument("--variant", required=True)
    de.add_argument("--cards", default=None, help='e.g. "9S KH 2D 3C 4H 5S"')
    de.add_argument("--batch", action="store_true", help="one card list per stdin line")
    de.add_argument("--decks", type=int, default=None)
    de.add_argument("--strategy", default=None, help="named strategy for optional draws")
    de.set_defaults(func=cmd_deal)

    o = sub.add_parser("odds", help="exact probabilities and house edge by full enumeration")
    o.add_argument("--variant", required=True)
    o.add_argument("--decks", type=int, default=8)
    o.add_argument("--json", action="store_true")
    o.set_defaults(func=cmd_odds)

    e = sub.add_parser("export", help="every event of the log as JSONL, in log order")
    e.add_argument("--db", required=True)
    e.add_argument("--out", required=True)
    e.set_defaults(func=cmd_export)

    r = sub.add_parser("replay", help="regulatory replay of a log; exit 1 on any finding")
    src = r.add_mutually_exclusive_group(required=True)
    src.add_argument("--db")
    src.add_argument("--jsonl")
    src.add_argument("--kafka")
    r.add_argument("--json", action="store_true", help="print the JSON report")
    r.add_argument("--html", default=None, help="write the human report to this file")
    r.add_argument("--table", action="append", default=None, help="limit to these tables")
    r.add_argument("--since", default=None)
    r.add_argument("--until", default=None)
    r.add_argument("--coup", default=None, help="print one game round in full (with --html: write it there)")
    r.add_argument("--keys", default=None, help="public keyring (else CASINO_PUBLIC_KEYRING)")
    r.set_defaults(func=cmd_replay)

    k = sub.add_parser("keys", help="keyrings: secrets per principal, and their public half")
    ksub = k.add_subparsers(dest="keys_command", required=True)
    from services.runtime.keys_public import add_keys_public  # noqa: PLC0415

    add_keys_public(ksub)

    w = sub.add_parser("worker", help="run one Kafka stream processor")
    w.add_argument("name", choices=["dealer", "settlement", "audit", "monitor"])
    w.add_argument("--broker", default=None, help="kafka://host:port (else CASINO_BOOTSTRAP_SERVERS)")
    w.set_defaults(func=cmd_worker)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``casino-ledger`` console script."""
    args = build_parser().parse_args(argv)
    if args.command == "deal" and not args.batch and not args.cards:
        return _fail("deal needs --cards or --batch")
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
