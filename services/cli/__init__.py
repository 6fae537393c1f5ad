"""The command line (docs/cli.md): a contract that scripts and people rely on.

Errors are one line on stderr and a non-zero exit: 2 for bad input and for what the operator can fix
(a missing, foreign or damaged log, a full disk, an unreachable broker, a malformed setting), 70 for
a bug (with a hint; the traceback only with ``CASINO_DEBUG=1``), 130 when interrupted, 141 when stdout
was closed by its reader. JSON goes to stdout.

The parser is click with rich help (:mod:`services.cli.app`); a command's options arrive here as an
:class:`argparse.Namespace` (the handlers' interface), and each handler imports what it needs only when
it runs, so that ``--help`` stays fast.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import traceback
from collections.abc import Sequence
from typing import Any

from services.core.errors import DomainError

EXIT_BAD_INPUT = 2
EXIT_SOFTWARE = 70
"""A bug (``EX_SOFTWARE``): an exception no shell knew how to explain."""
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141
"""Stdout was closed by its reader (``| head``): quietly, with the shell's status for SIGPIPE."""


def _fail(message: str) -> int:
    from services.runtime.textfit import printable  # noqa: PLC0415 (keeps --help fast)

    print(f"casino-ledger: error: {printable(message)}", file=sys.stderr)  # a log's text may be in it
    return EXIT_BAD_INPUT


def cmd_deal(args: argparse.Namespace) -> int:
    """Resolve one coup (or one per stdin line with --batch) from a given card order."""
    from services.core.baccarat import get_variant, resolve  # noqa: PLC0415 (keeps --help fast)
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
    fast = variant.fast_play()
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
        else:  # at the terminal's width, wrapped between words: a figure is never cut
            from services.runtime.textfit import fit  # noqa: PLC0415

            print(fit(odds.odds_text(args.variant, decks)))
    except DomainError as exc:
        return _fail(str(exc))
    return 0


def cmd_settle(args: argparse.Namespace) -> int:
    """The dispute calculator: one coup and its bets in, acceptance, result and payouts out
    (docs/integration.md)."""
    from services.simulation import dispute  # noqa: PLC0415

    return dispute.main(args)


def cmd_demo(args: argparse.Namespace) -> int:
    """The main job on the embedded default."""
    from services.cli import demo  # noqa: PLC0415

    return demo.main(args)


def cmd_export(args: argparse.Namespace) -> int:
    """Every event of the log, one envelope per line, in log order (``--out -``: to stdout, the summary
    line then goes to stderr)."""
    from pathlib import Path  # noqa: PLC0415

    from services.runtime import replay  # noqa: PLC0415

    out, db = Path(args.out), Path(args.db)
    if args.out == "-":
        if not db.exists():
            return _fail(f"no log at {db}")
        from services.runtime.progress import progress  # noqa: PLC0415

        n = 0
        with progress("export", replay.db_count(db), "records", every=1000) as done:
            for raw in replay.read_db(db, done):
                sys.stdout.buffer.write(raw + b"\n")
                n += 1
        sys.stdout.buffer.flush()
        print(json.dumps({"exported": n, "out": "-"}), file=sys.stderr)
        return 0
    from services.runtime.outputs import WouldOverwrite, check_output  # noqa: PLC0415

    try:  # never the log, its WAL or a keyring
        check_output(out, "--out", db=db)
    except WouldOverwrite as exc:
        return _fail(str(exc))
    return replay.export_main(args)


def cmd_replay(args: argparse.Namespace) -> int:
    """The regulatory replay: re-derives everything, prints a report and a digest."""
    from services.runtime import replay  # noqa: PLC0415

    if args.kafka:  # its connection errors reach the user as one line, not as log records too
        logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    return replay.replay_main(args)


def cmd_reconcile(args: argparse.Namespace) -> int:
    """The operator's seamless-wallet transactions against ours; exit 1 on any difference."""
    from services.integrations.seamless import reconcile  # noqa: PLC0415

    return reconcile.main(args)


def cmd_worker(args: argparse.Namespace) -> int:
    """A Kafka stream processor (faust worker)."""
    from services.cli.worker import worker_main  # noqa: PLC0415

    run: Any = worker_main
    result: int = run(args)
    return result


def cmd_keys_split(args: argparse.Namespace) -> int:
    """An existing keyring's key files, one per principal (docs/trust.md), and its public keyring."""
    from services.runtime.keyring import KeyringError, load_keyring, save_split  # noqa: PLC0415

    try:
        written = save_split(load_keyring(args.keyring_in), args.out)
    except KeyringError as exc:
        return _fail(str(exc))
    names = ", ".join(p.name for p in written)
    print(f"wrote {len(written)} files into {args.out} (key files mode 0600): {names}", file=sys.stderr)
    return 0


def cmd_keys_new(args: argparse.Namespace) -> int:
    """A keyring with a fresh secret per principal (docs/trust.md), mode 0600."""
    from services.runtime.keyring import KeyringError, new_keyring, save_keyring, save_split  # noqa: PLC0415

    out, split = getattr(args, "out", None), getattr(args, "split", None)
    if not out and not split:
        return _fail("keys new needs --out FILE or --split DIR")
    try:
        ring = new_keyring()
        if out:
            save_keyring(ring, out)
        if split:
            save_split(ring, split)
    except KeyringError as exc:
        return _fail(str(exc))
    ids = ", ".join(k.key_id for k in ring.keys.values())
    where = " and ".join(
        w for w in (f"keyring {out}" if out else "", f"key files in {split}" if split else "") if w
    )
    print(f"wrote {where} (mode 0600): {ids}", file=sys.stderr)
    return 0


def cmd_ingest(args: argparse.Namespace) -> int:
    """Outside writers' records into the embedded log, then the pipeline until idle (docs/integration.md)."""
    from services.cli import ingest  # noqa: PLC0415

    return ingest.main(args)


def parse(argv: Sequence[str]) -> argparse.Namespace | int:
    """The options of ``argv`` as the handlers take them, or the exit status when parsing ended the run
    (``--help``, ``--version``, a bad invocation: its one line already on stderr)."""
    from services.cli.app import parse_args  # noqa: PLC0415

    return parse_args(list(argv))


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``casino-ledger`` console script."""
    try:
        parsed = parse(sys.argv[1:] if argv is None else argv)
    except KeyboardInterrupt:
        print("casino-ledger: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    if isinstance(parsed, int):
        return parsed
    args = parsed
    if args.command == "deal" and not args.batch and not args.cards:
        return _fail("deal needs --cards or --batch")
    from services.runtime.tuning import tune_gc  # noqa: PLC0415 (not for --help: it loads no runtime)

    tune_gc()
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
    from services.runtime.settings import setting  # noqa: PLC0415

    if setting("debug") == "1":
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
