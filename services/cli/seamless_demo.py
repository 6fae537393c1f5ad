"""``casino-ledger demo --seamless [URL]``: the seeded session against an operator's wallet.

With a URL, the operator there (its accounts ``player:001``… already funded; ``CASINO_SEAMLESS_SECRET``
signs the calls). Without, the reference wallet on a free loopback port, its ledger beside the log
(``<db>.operator.db``), each player funded as the internal demo would deposit; its export is written
beside the log (``<db>.operator.json``) and reconciled against the log at the end.
"""

from __future__ import annotations

import argparse
import json
import secrets
import shlex
import sys
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from typing import Any

from pydantic import SecretStr
from rich.console import Console

from services.cli.demo import META_KEY, invoked_as, open_composition, render, say_written, summarise
from services.integrations.seamless.caller import SeamlessBus
from services.integrations.seamless.reconcile import ours_from, reconcile
from services.integrations.seamless.reference_wallet import export, serve
from services.runtime.compose import seamless_config
from services.runtime.failures import one_line
from services.runtime.replay import Source, read_db, replay
from services.runtime.settings import SeamlessConfig, Settings, setting
from services.simulation.simulator import Session, TableSpec


def main_seamless(
    args: argparse.Namespace, console: Console, tables: list[TableSpec], coups: int, seed: int, path: Path,
    options: dict[str, int],
) -> int:  # fmt: skip
    """Play the session through the seamless adapter; print the summary, the verdict and reconcile."""
    path.parent.mkdir(parents=True, exist_ok=True)
    composition = open_composition(Path(f"{path}.keyring.json"))
    if composition is None:
        return 2
    with ExitStack() as stack:
        wallet = None
        if args.seamless:
            try:
                given = Settings(seamless_url=args.seamless, seamless_secret=setting("seamless_secret"))
                config = seamless_config(given)
            except ValueError as exc:  # a pydantic ValidationError: its sentence, never the secret
                why = one_line(exc) or "bad seamless settings"
                print(f"casino-ledger: error: --seamless: {why}", file=sys.stderr)
                return 2
            assert config is not None
        else:
            key = secrets.token_hex(24)
            probe = Session(bus=None, seed=seed)  # type: ignore[arg-type]  # only its account names
            funded = dict.fromkeys(probe.accounts(), probe.deposit_minor)
            ledger = Path(f"{path}.operator.db")
            if not args.resume:  # a new session: a new operator (its old ledger would not reconcile)
                for suffix in ("", "-wal", "-shm"):
                    Path(f"{ledger}{suffix}").unlink(missing_ok=True)
            accounts = None if args.resume else funded
            wallet = stack.enter_context(serve(ledger, key.encode(), accounts=accounts))
            config = SeamlessConfig(url=wallet.url, secret=SecretStr(key))
        composition = replace(composition, seamless=config)
        bus = SeamlessBus(path, composition.pipeline(), config, composition.settlement_guard())
        try:
            bus.log.set_meta(META_KEY, json.dumps(options, sort_keys=True))
            console.print(f"seamless wallet: {config.url} ({'reference wallet' if wallet else 'operator'})")
            session = Session(bus, seed=seed, keyring=composition.keyring, deposits=False)
            session.run(tables, coups)
            console.print(f"seamless calls made: {bus.calls}")
        finally:
            bus.close()
        differences: list[Any] = []
        if wallet is not None:
            export(wallet.ledger, f"{path}.operator.json")
            differences = reconcile(ours_from(read_db(path)), wallet.ledger.transactions())
            console.print(f"reconcile against {path}.operator.json: {len(differences)} differences")
    report = replay(
        Source(lambda: read_db(path)),
        keys=composition.checkpoint_public_keys(),
        writers=composition.writer_public_keys(),
    )
    replay_cmd = f"{invoked_as()} replay --db {shlex.quote(str(path))}"
    render(console, summarise(read_db(path)), report, str(path), path, replay_cmd)
    operator = [(Path(f"{path}.operator.db"), "the reference wallet's ledger"),
                (Path(f"{path}.operator.json"), "its export")] if wallet is not None else []  # fmt: skip
    say_written(console, path, operator)
    return 0 if report.clean and not differences else 1
