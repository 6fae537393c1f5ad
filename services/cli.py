"""The command line (DESIGN §6): a contract that scripts and people rely on.

Errors are one line on stderr and a non-zero exit: 2 for bad input and for what the operator can fix
(a missing, foreign or damaged log, a full disk, an unreachable broker, a malformed setting), 70 for
a bug (with a hint; the traceback only with ``CASINO_DEBUG=1``), 130 when interrupted. JSON goes to
stdout.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import traceback
from collections.abc import Sequence
from typing import Any, NoReturn

from services.core.errors import DomainError

EXIT_BAD_INPUT = 2
EXIT_SOFTWARE = 70
"""A bug (``EX_SOFTWARE``): an exception no shell knew how to explain."""
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141
"""Stdout was closed by its reader (``| head``): quietly, with the shell's status for SIGPIPE."""


def _fail(message: str) -> int:
    print(f"casino-ledger: error: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT


def cmd_deal(args: argparse.Namespace) -> int:
    """Resolve one coup (or one per stdin line with --batch) from a given card order."""
    from services.core.baccarat import get_variant, resolve  # noqa: PLC0415 (keeps --help fast)
    from services.core.baccarat.variants.punto_banco import TwoHandGame  # noqa: PLC0415
    from services.core.cards import check_shoe_holds, parse_cards  # noqa: PLC0415

    try:
        variant = get_variant(args.variant)
        config = variant.config(decks=args.decks) if args.decks is not None else variant.config()
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
            check_shoe_holds(cards, config.decks)
            result = fast(cards) if fast else resolve(config, cards, strategy=strategy)
        except DomainError as exc:
            where = f"line {lineno}: " if args.batch else ""
            return _fail(f"{where}{exc}")
        out.write(json.dumps(result.to_dict(), separators=(",", ":") if args.batch else (", ", ": ")) + "\n")
    return 0


def cmd_odds(args: argparse.Namespace) -> int:
    """Exact probabilities and house edge of every bet, by full enumeration."""
    from services.core.baccarat import get_variant, odds  # noqa: PLC0415

    try:
        decks = get_variant(args.variant).default_decks if args.decks is None else args.decks
        if args.json:
            print(json.dumps(odds.odds_report(args.variant, decks), indent=2))
        else:
            print(odds.odds_text(args.variant, decks))
    except DomainError as exc:
        return _fail(str(exc))
    return 0


def cmd_settle(args: argparse.Namespace) -> int:
    """The dispute calculator: one coup and its bets in, acceptance, result and payouts out (§10)."""
    from services.runtime import settle  # noqa: PLC0415

    return settle.main(args)


def cmd_demo(args: argparse.Namespace) -> int:
    """The main job on the embedded default."""
    from services.runtime import demo  # noqa: PLC0415

    return demo.main(args)


def cmd_export(args: argparse.Namespace) -> int:
    """Every event of the log, one envelope per line, in log order."""
    from pathlib import Path  # noqa: PLC0415

    from services.runtime import replay  # noqa: PLC0415

    out, db = Path(args.out), Path(args.db)
    log_files = [p for p in (db, Path(f"{db}-wal"), Path(f"{db}-shm")) if p.exists()]
    if out.exists() and any(os.path.samefile(out, p) for p in log_files):
        return _fail(f"--out {args.out} is the log itself: the export would destroy what it reads")
    return replay.export_main(args)


def cmd_replay(args: argparse.Namespace) -> int:
    """The regulatory replay: re-derives everything, prints a report and a digest."""
    from services.runtime import replay  # noqa: PLC0415

    if args.kafka:  # its connection errors reach the user as one line, not as log records too
        logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    return replay.replay_main(args)


def cmd_reconcile(args: argparse.Namespace) -> int:
    """The operator's seamless-wallet transactions against ours; exit 1 on any difference."""
    from services.seamless import reconcile  # noqa: PLC0415

    return reconcile.main(args)


def cmd_worker(args: argparse.Namespace) -> int:
    """A Kafka stream processor (faust worker)."""
    from services.runtime import kafka  # noqa: PLC0415

    run: Any = kafka.worker_main
    result: int = run(args)
    return result


def _add_topics(sub: Any) -> None:
    """``topics create``: the Kafka topics of the contract (schemas/topics.yaml), for the deploy's job."""
    t = sub.add_parser("topics", help="Kafka topic administration")
    tsub = t.add_subparsers(dest="topics_command", required=True)
    c = tsub.add_parser("create", help="create the topics of the contract that do not exist yet (idempotent)")
    c.add_argument("--broker", default=None, help="host:port[,...] (default: $CASINO_BOOTSTRAP_SERVERS)")
    c.add_argument("--spec", default=None, help="topic list (default: $CASINO_TOPIC_SPEC)")

    def run(args: argparse.Namespace) -> int:
        from services.runtime import kafka  # noqa: PLC0415 (keeps --help fast)

        return kafka.topics_create_main(args)

    c.set_defaults(func=run)


class _Parser(argparse.ArgumentParser):
    """argparse, with its errors as one line (no usage block) and exit status 2."""

    def error(self, message: str) -> NoReturn:
        """Print ``message`` as the command line's one error line and exit 2."""
        self.exit(EXIT_BAD_INPUT, f"casino-ledger: error: {self.prog}: {message} (see --help)\n")


def cmd_keys_new(args: argparse.Namespace) -> int:
    """A keyring with a fresh secret per principal (DESIGN §9), mode 0600."""
    from services.runtime.keyring import KeyringError, new_keyring, save_keyring  # noqa: PLC0415

    try:
        ring = new_keyring()
        save_keyring(ring, args.out)
    except KeyringError as exc:
        return _fail(str(exc))
    ids = ", ".join(k.key_id for k in ring.keys.values())
    print(f"wrote keyring {args.out} (mode 0600): {ids}", file=sys.stderr)
    return 0


def cmd_ingest(args: argparse.Namespace) -> int:
    """Outside writers' records into the embedded log, then the pipeline until idle (DESIGN §10)."""
    from services.runtime import ingest  # noqa: PLC0415

    return ingest.main(args)


def build_parser() -> argparse.ArgumentParser:  # noqa: PLR0915 (one table of sub-commands)
    """The argument parser of every sub-command."""
    p = _Parser(prog="casino-ledger", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)

    d = sub.add_parser("demo", help="run the main job on the embedded SQLite log")
    d.add_argument("--tables", type=int, default=None)
    d.add_argument("--coups", type=int, default=None)
    d.add_argument("--seed", type=int, default=None, help="the session's seed (default 2026)")
    d.add_argument("--db", default=None, help="SQLite log path (default: var/demo-seed<SEED>.db)")
    again = d.add_mutually_exclusive_group()
    again.add_argument("--resume", action="store_true", help="continue the interrupted session in --db")
    again.add_argument("--force", action="store_true", help="replace an existing --db file")
    d.add_argument("--kafka", default=None, help="drive the session through Kafka at HOST:PORT")
    d.add_argument("--seamless", nargs="?", const="", default=None, metavar="URL",
                   help="play against an operator's seamless wallet at URL (CASINO_SEAMLESS_SECRET signs), "
                   "or the reference wallet on a loopback port when no URL is given")  # fmt: skip
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
    o.add_argument("--decks", type=int, default=None, help="default: the variant's own")
    o.add_argument("--json", action="store_true")
    o.set_defaults(func=cmd_odds)

    st = sub.add_parser("settle", help="dispute calculator: one coup and its bets, every payout (JSON)")
    st.add_argument("--in", dest="infile", default=None, help="the coup as JSON (default: stdin)")
    st.set_defaults(func=cmd_settle)

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
    kn = ksub.add_parser("new", help="write a keyring with a fresh secret per principal (mode 0600)")
    kn.add_argument("--out", required=True, help="the keyring file to create (never overwritten)")
    kn.set_defaults(func=cmd_keys_new)
    from services.runtime.keys_public import add_keys_public  # noqa: PLC0415

    add_keys_public(ksub)

    i = sub.add_parser("ingest", help="outside records into the embedded log, then run the pipeline")
    i.add_argument("--db", required=True)
    i.add_argument("--as", dest="as_", action="append", default=None, metavar="PRINCIPAL",
                   help="sign each record as this principal (repeatable; a line's \"as\" picks)")  # fmt: skip
    i.add_argument("file", nargs="?", default="-", help="JSON lines (default: stdin)")
    i.set_defaults(func=cmd_ingest)

    rc = sub.add_parser("reconcile", help="the operator's seamless-wallet export against our log")
    rc.add_argument("--operator", required=True, help="the operator's export (JSON or CSV)")
    ours = rc.add_mutually_exclusive_group(required=True)
    ours.add_argument("--db")
    ours.add_argument("--jsonl")
    rc.add_argument("--json", action="store_true", help="print one JSON object")
    rc.set_defaults(func=cmd_reconcile)

    w = sub.add_parser("worker", help="run one Kafka stream processor")
    w.add_argument("name", choices=["dealer", "settlement", "audit", "monitor"])
    w.add_argument("--broker", default=None, help="kafka://host:port (else CASINO_BOOTSTRAP_SERVERS)")
    w.set_defaults(func=cmd_worker)
    _add_topics(sub)

    from services.backoffice.cli import register as register_backoffice  # noqa: PLC0415 (argparse only)

    register_backoffice(sub)  # serve, apikey, project, statement, report
    from services.runtime.alerts_cli import register as register_alerts  # noqa: PLC0415

    register_alerts(sub)  # alerts, monitor-eval
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``casino-ledger`` console script."""
    args = build_parser().parse_args(argv)
    if args.command == "deal" and not args.batch and not args.cards:
        return _fail("deal needs --cards or --batch")
    try:
        code: int = args.func(args)
    except KeyboardInterrupt:
        print("casino-ledger: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:  # the last resort: one line, never a traceback unless asked for
        return _explain(exc, args)
    return code


def _explain(exc: Exception, args: argparse.Namespace) -> int:
    from services.runtime.failures import one_line  # noqa: PLC0415

    if isinstance(exc, BrokenPipeError):  # stdout closed by a pager or `head`: nothing left to say
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    line = one_line(exc, getattr(args, "db", None))
    if line is not None:
        return _fail(line)
    if os.environ.get("CASINO_DEBUG") == "1":
        traceback.print_exc()
    print(
        f"casino-ledger: internal error: {type(exc).__name__} in `{args.command}` (a bug: please report it "
        "with the command line; run again with CASINO_DEBUG=1 for the traceback)",
        file=sys.stderr,
    )
    return EXIT_SOFTWARE


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


if __name__ == "__main__":
    sys.exit(main())
