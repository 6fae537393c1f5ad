"""The command line under bad input and a hostile environment (issue #8): a survey of bad invocations,
each answered with exactly one line on stderr and exit status 2, never a traceback, never a secret."""

# ruff: noqa: E501 (the survey is a table: one invocation per line reads best)

from __future__ import annotations

import os
import resource
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from services.runtime.embedded.store import EmbeddedLog
from tests.helpers.kill import run_with_kills
from tests.helpers.streams import log_streams

CLI = [sys.executable, "-m", "services.cli"]
SECRET = "hunter2-sasl-password-do-not-print"
BASE_ENV = {**os.environ, "LOG_LEVEL": "WARNING", "CASINO_SASL_PASSWORD": SECRET}


@dataclass(frozen=True)
class Bad:
    """One bad invocation: its arguments (``{d}`` is a scratch directory, ``{good}`` a real log), extra
    environment, and a fragment its error line must contain."""

    argv: tuple[str, ...]
    needle: str
    env: dict[str, str] = field(default_factory=dict)
    stdin: bytes = b""
    stdout_to: str | None = None
    file_size_limit: int | None = None
    program: tuple[str, ...] = tuple(CLI)


def _files(d: Path) -> None:
    (d / "truncated.db").write_bytes(b"SQLite format 3\x00" + b"\x00" * 40)
    (d / "foreign.db").write_text('{"not": "a database"}\n')
    (d / "random.db").write_bytes(bytes(range(256)) * 20)
    (d / "empty.db").write_bytes(b"")
    (d / "dir.db").mkdir()
    conn = sqlite3.connect(d / "other-app.db")
    conn.execute("CREATE TABLE customers (id INTEGER, name TEXT)")
    conn.commit()
    conn.close()
    (d / "bin.txt").write_bytes(b"\xff\xfe\x00garbage\n")


SURVEY: dict[str, Bad] = {
    # log files that are not logs
    "replay a truncated db": Bad(("replay", "--db", "{d}/truncated.db"), "truncated.db"),
    "replay a JSON file as db": Bad(("replay", "--db", "{d}/foreign.db"), "foreign.db"),
    "replay random bytes as db": Bad(("replay", "--db", "{d}/random.db"), "random.db"),
    "replay an empty file": Bad(("replay", "--db", "{d}/empty.db"), "empty.db"),
    "alerts of a truncated db": Bad(("alerts", "--db", "{d}/truncated.db"), "truncated.db"),
    "alerts of a JSON file": Bad(("alerts", "--db", "{d}/foreign.db"), "foreign.db"),
    "alerts of a missing log": Bad(("alerts", "--db", "{d}/missing.db"), "no log at"),
    "alerts since a bad instant": Bad(("alerts", "--db", "{good}", "--since", "yesterday"), "ISO 8601"),
    "alerts of a bad severity": Bad(("alerts", "--db", "{good}", "--severity", "loud"), "invalid choice"),
    "monitor-eval with no runs": Bad(("monitor-eval", "--runs", "0"), "positive"),
    "replay another app's SQLite": Bad(("replay", "--db", "{d}/other-app.db"), "customers"),
    "replay a directory as db": Bad(("replay", "--db", "{d}/dir.db"), "directory"),
    "replay a missing db": Bad(("replay", "--db", "{d}/missing.db"), "missing.db"),
    "replay a directory as jsonl": Bad(("replay", "--jsonl", "{d}/dir.db"), "directory"),
    "replay a missing jsonl": Bad(("replay", "--jsonl", "{d}/missing.jsonl"), "missing.jsonl"),
    "export a truncated db": Bad(("export", "--db", "{d}/truncated.db", "--out", "{d}/x.jsonl"), "truncated"),
    "export another app's SQLite": Bad(("export", "--db", "{d}/other-app.db", "--out", "{d}/x"), "customers"),
    "export a directory as db": Bad(("export", "--db", "{d}/dir.db", "--out", "{d}/x.jsonl"), "directory"),
    "export onto its own log": Bad(("export", "--db", "{good}", "--out", "{good}"), "the log itself"),
    "export into a missing dir": Bad(("export", "--db", "{good}", "--out", "{d}/no/x.jsonl"), "No such file"),
    "replay html into a missing dir": Bad(("replay", "--db", "{good}", "--html", "{d}/no/r.html"), "No such"),
    "replay --since not a date": Bad(("replay", "--db", "{good}", "--since", "yesterday"), "ISO 8601"),
    # a full disk
    "export to a full disk": Bad(("export", "--db", "{good}", "--out", "/dev/full"), "disk is full"),
    "replay json to a full stdout": Bad(("replay", "--db", "{good}", "--json"), "disk is full", stdout_to="/dev/full"),
    "deal to a full stdout": Bad(("deal", "--variant", "punto_banco", "--cards", "9S KH 2D 3C 4H 5S"), "disk is full",
                                 stdout_to="/dev/full"),
    "demo on a full disk": Bad(("demo", "--coups", "30", "--tables", "3", "--db", "{d}/full.db", "--quiet"),
                               "full.db", file_size_limit=96 * 1024),
    # an unreachable broker
    "replay --kafka unreachable": Bad(("replay", "--kafka", "127.0.0.1:1"), "127.0.0.1:1"),
    "demo --kafka unreachable": Bad(("demo", "--kafka", "127.0.0.1:1", "--coups", "1", "--tables", "1"), "127.0.0.1:1"),
    "worker without a keyring": Bad(("worker", "dealer", "--broker", "127.0.0.1:1"), "CASINO_KEYRING"),
    "worker unreachable": Bad(("worker", "dealer", "--broker", "127.0.0.1:1"), "127.0.0.1:1",
                              env={"CASINO_DEMO_MODE": "true"}),
    "kafka module worker unreachable": Bad(("dealer", "--broker", "127.0.0.1:1"), "127.0.0.1:1",
                                           env={"CASINO_DEMO_MODE": "true"},
                                           program=(sys.executable, "-m", "services.cli.worker")),
    "kafka module bad setting": Bad(("create-topics",), "CASINO_PARTITIONS", env={"CASINO_PARTITIONS": "x"},
                                    program=(sys.executable, "-m", "services.cli.worker")),
    "replay --kafka no port": Bad(("replay", "--kafka", "127.0.0.1:abc"), "host:port"),
    # malformed settings and keys (a password is in the environment: it must not be printed)
    "public keyring not JSON": Bad(("replay", "--db", "{good}"), "foreign.db",
                                   env={"CASINO_PUBLIC_KEYRING": "{d}/foreign.db"}),
    "public keyring missing": Bad(("replay", "--db", "{good}", "--keys", "{d}/nowhere.json"), "nowhere.json"),
    "pinned heads missing": Bad(("replay", "--db", "{good}", "--expect", "{d}/nowhere.json"), "nowhere.json"),
    "pinned heads not heads": Bad(("replay", "--db", "{good}", "--expect", "{d}/foreign.db"), "foreign.db"),
    "heads of a JSON file as db": Bad(("heads", "--db", "{d}/foreign.db"), "foreign.db"),
    "heads of a missing db": Bad(("heads", "--db", "{d}/missing.db"), "missing.db"),
    "heads of another app's SQLite": Bad(("heads", "--db", "{d}/other-app.db"), "customers"),
    "keyring not JSON": Bad(("ingest", "--db", "{d}/new.db", "--as", "cashier", "{d}/foreign.db"), "keyring",
                            env={"CASINO_KEYRING": "{d}/random.db"}),
    "bad checkpoint cadence": Bad(("replay", "--db", "{good}"), "CASINO_AUDIT_CHECKPOINT_EVERY",
                                  env={"CASINO_AUDIT_CHECKPOINT_EVERY": "often"}),
    "partitions not a number": Bad(("worker", "dealer"), "CASINO_PARTITIONS", env={"CASINO_PARTITIONS": "many"}),
    "SASL without a user": Bad(("worker", "dealer"), "CASINO_SASL_USERNAME",
                               env={"CASINO_SECURITY_PROTOCOL": "SASL_SSL"}),
    "unknown security protocol": Bad(("demo", "--kafka", "127.0.0.1:1"), "CASINO_SECURITY_PROTOCOL",
                                     env={"CASINO_SECURITY_PROTOCOL": "BOGUS"}),
    # demo options
    "demo --coups negative": Bad(("demo", "--coups", "-1", "--db", "{d}/n.db"), "--coups"),
    "demo --coups zero": Bad(("demo", "--coups", "0", "--db", "{d}/n.db"), "--coups"),
    "demo --coups too large": Bad(("demo", "--coups", "1000000000000", "--db", "{d}/n.db"), "--coups"),
    "demo --coups not a number": Bad(("demo", "--coups", "many"), "--coups"),
    "demo --tables negative": Bad(("demo", "--tables", "-3", "--db", "{d}/n.db"), "--tables"),
    "demo --tables too large": Bad(("demo", "--tables", "100000000", "--db", "{d}/n.db"), "--tables"),
    "demo --db a directory": Bad(("demo", "--db", "{d}/dir.db"), "directory"),
    "demo --db an existing log": Bad(("demo", "--db", "{good}"), "--resume"),
    "demo --db another app's db": Bad(("demo", "--db", "{d}/other-app.db"), "--force"),
    "demo --resume a foreign db": Bad(("demo", "--resume", "--db", "{d}/other-app.db"), "no demo session"),
    "demo --resume other options": Bad(("demo", "--resume", "--coups", "9", "--db", "{good}"), "--coups 2"),
    "demo --resume and --force": Bad(("demo", "--resume", "--force", "--db", "{good}"), "--force"),
    "demo --kafka --resume": Bad(("demo", "--kafka", "127.0.0.1:1", "--resume"), "--kafka"),
    # the rules' inputs
    "deal unknown variant": Bad(("deal", "--variant", "blackjack", "--cards", "9S KH 2D 3C"), "blackjack"),
    "odds unknown variant": Bad(("odds", "--variant", "blackjack"), "blackjack"),
    "deal bad card": Bad(("deal", "--variant", "punto_banco", "--cards", "ZZ KH 2D 3C"), "ZZ"),
    "deal too few cards": Bad(("deal", "--variant", "punto_banco", "--cards", "9S"), "too_few_cards"),
    "deal no cards": Bad(("deal", "--variant", "punto_banco"), "--cards"),
    "deal negative decks": Bad(("deal", "--variant", "punto_banco", "--decks", "-1", "--cards", "9S KH 2D 3C"), "-1"),
    "deal huge decks": Bad(("deal", "--variant", "punto_banco", "--decks", "10000000000", "--cards", "9S KH"),
                           "10000000000"),
    "deal batch of binary": Bad(("deal", "--variant", "punto_banco", "--batch"), "line 1", stdin=b"\xff\xfe\x00 9S\n"),
    "odds too many decks": Bad(("odds", "--variant", "punto_banco", "--decks", "100000"), "decks"),
    "odds negative decks": Bad(("odds", "--variant", "punto_banco", "--decks", "-8"), "decks"),
    # the seamless wallet
    "reconcile a foreign export": Bad(("reconcile", "--operator", "{d}/foreign.db", "--db", "{good}"),
                                      "operator export"),
    "reconcile a binary export": Bad(("reconcile", "--operator", "{d}/bin.txt", "--db", "{good}"), "bin.txt"),
    "demo --seamless with --kafka": Bad(("demo", "--seamless", "--kafka", "127.0.0.1:1"), "--seamless"),
    # the parser itself
    "unknown command": Bad(("bogus",), "bogus"),
    "no command": Bad((), "command"),
    "unknown worker": Bad(("worker", "cashier"), "cashier"),
}  # fmt: skip


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real demo log (seed 4, 2 tables, 2 coups), with the options `demo` records."""
    db = tmp_path_factory.mktemp("good") / "good.db"
    subprocess.run([*CLI, "demo", "--seed", "4", "--tables", "2", "--coups", "2", "--db", str(db), "--quiet"],
                   env=BASE_ENV, check=True, timeout=300, capture_output=True)  # fmt: skip
    return db


def _limit(size: int | None) -> Callable[[], None] | None:
    if size is None:
        return None

    def apply() -> None:  # the child writes at most `size` bytes per file: a disk that fills up
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))

    return apply


@pytest.mark.parametrize("case", list(SURVEY), ids=list(SURVEY))
def test_bad_invocation_is_one_line_and_status_2(case: str, tmp_path: Path, good: Path) -> None:
    """The invocation ends with status 2 and exactly one ``casino-ledger: error:`` line on stderr that
    names the problem: no traceback, no internal error, and no secret from the environment."""
    bad = SURVEY[case]
    _files(tmp_path)
    before = good.read_bytes()
    argv = [a.format(d=tmp_path, good=good) for a in bad.argv]
    stdout = open(bad.stdout_to, "wb") if bad.stdout_to else subprocess.PIPE  # noqa: SIM115
    try:
        done = subprocess.run([*bad.program, *argv], input=bad.stdin, stdout=stdout, stderr=subprocess.PIPE,
                              env={**BASE_ENV, **{k: v.format(d=tmp_path) for k, v in bad.env.items()}},
                              timeout=120, check=False,
                              preexec_fn=_limit(bad.file_size_limit))  # fmt: skip
    finally:
        if bad.stdout_to:
            stdout.close()  # type: ignore[union-attr]
    err = done.stderr.decode("utf-8", "replace")
    assert done.returncode == 2, err
    assert err.startswith("casino-ledger: error:"), err
    assert err.count("\n") == 1 and err.endswith("\n"), err
    assert bad.needle in err, err
    assert "Traceback" not in err and "internal error" not in err
    assert SECRET not in err and SECRET not in (done.stdout or b"").decode("utf-8", "replace")
    assert good.read_bytes() == before, "a bad invocation changed the good log"


def test_replay_of_a_foreign_sqlite_db_leaves_it_untouched(tmp_path: Path) -> None:
    """Replaying another application's SQLite file refuses it without creating the log's tables in it."""
    _files(tmp_path)
    subprocess.run([*CLI, "replay", "--db", str(tmp_path / "other-app.db")], env=BASE_ENV, timeout=60,
                   capture_output=True, check=False)  # fmt: skip
    conn = sqlite3.connect(tmp_path / "other-app.db")
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    conn.close()
    assert tables == {"customers"}


def test_an_unexpected_exception_is_one_line_and_status_70(tmp_path: Path) -> None:
    """A bug (here: a processor module that raises on import, forced through ``CASINO_DEBUG`` off and
    on) prints one line with a hint and exits 70; the traceback appears only with ``CASINO_DEBUG=1``."""
    boom = tmp_path / "sitecustomize.py"
    boom.write_text(
        "import services.cli.demo as d\n"
        "def _boom(*a, **k):\n    raise ZeroDivisionError('boom')\n"
        "d._play = _boom\n"
    )
    env = {**BASE_ENV, "PYTHONPATH": f"{tmp_path}{os.pathsep}{BASE_ENV.get('PYTHONPATH', '')}"}
    argv = [*CLI, "demo", "--coups", "1", "--tables", "1", "--db", str(tmp_path / "x.db"), "--force"]
    quiet = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert quiet.returncode == 70, quiet.stderr
    assert quiet.stderr.count("\n") == 1 and "CASINO_DEBUG=1" in quiet.stderr
    assert "ZeroDivisionError" in quiet.stderr
    assert "Traceback" not in quiet.stderr
    loud = subprocess.run(argv, env={**env, "CASINO_DEBUG": "1"}, capture_output=True, text=True, timeout=120,
                          check=False)  # fmt: skip
    assert loud.returncode == 70
    assert "Traceback" in loud.stderr and "boom" in loud.stderr


def test_demo_never_overwrites_an_existing_file_unless_forced(tmp_path: Path) -> None:
    """`demo --db` on an existing file refuses and leaves it byte for byte; with `--force` it replaces it."""
    db = tmp_path / "precious.db"
    db.write_bytes(b"the only copy of something")
    argv = [*CLI, "demo", "--coups", "1", "--tables", "1", "--db", str(db), "--quiet"]
    refused = subprocess.run(argv, env=BASE_ENV, capture_output=True, text=True, timeout=120, check=False)
    assert refused.returncode == 2 and db.read_bytes() == b"the only copy of something"
    forced = subprocess.run([*argv, "--force"], env=BASE_ENV, capture_output=True, text=True, timeout=300,
                            check=False)  # fmt: skip
    assert forced.returncode == 0, forced.stderr
    with EmbeddedLog(db, readonly=True) as log:
        assert log.count() > 0


def test_resume_starts_a_demo_killed_before_it_stored_its_options(tmp_path: Path) -> None:
    """A kill between the log's creation and the session options stored in it leaves an empty log:
    `--resume` starts the session there (it refused with status 2, a flake of the kill test below), as
    it does on a file killed before its tables were made; a log with records but no options, or
    another program's file, is still refused and left as it was."""
    db = tmp_path / "empty.db"
    EmbeddedLog(db).close()  # what the demo had made when it was killed
    args = ["demo", "--seed", "8", "--tables", "1", "--coups", "2", "--quiet"]
    resumed = subprocess.run([*CLI, *args, "--resume", "--db", str(db)], env=BASE_ENV, capture_output=True,
                             text=True, timeout=300, check=False)  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    with EmbeddedLog(db, readonly=True) as log:
        assert log.count() > 0 and log.meta("demo") is not None

    # killed earlier still: the file opened (empty) or in WAL mode, before any table (refused, a flake)
    bare, wal = tmp_path / "bare.db", tmp_path / "wal.db"
    bare.touch()
    with sqlite3.connect(wal) as conn:
        conn.execute("PRAGMA journal_mode=WAL")
    for started in (bare, wal):
        resumed = subprocess.run([*CLI, *args, "--resume", "--db", str(started)], env=BASE_ENV,
                                 capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
        assert resumed.returncode == 0, resumed.stderr
        with EmbeddedLog(started, readonly=True) as log:
            assert log.count() > 0 and log.meta("demo") is not None

    foreign = tmp_path / "foreign.db"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE t (x)")
    before = foreign.read_bytes()
    refused = subprocess.run([*CLI, *args, "--resume", "--db", str(foreign)], env=BASE_ENV,
                             capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert refused.returncode == 2 and "no demo session" in refused.stderr
    assert foreign.read_bytes() == before


def test_a_demo_killed_midway_and_resumed_ends_as_an_uninterrupted_one(tmp_path: Path) -> None:
    """`demo --resume` SIGKILLed at seeded moments and run again each time (the first run finds no file
    and starts the session) ends with the log streams and the digest of a demo never interrupted."""
    from services.cli import demo as _demo  # noqa: F401, PLC0415 (imported once, before the forks)
    from services.cli import main  # noqa: PLC0415

    # long enough that six kills land inside the work even on an idle machine (the embedded runner's
    # group commit made 2 x 12 coups a 0.7 s job: the second run finished before its kill)
    args = ["demo", "--seed", "8", "--tables", "2", "--coups", "60"]
    started = time.perf_counter()
    ref = subprocess.run([*CLI, *args, "--db", str(tmp_path / "ref.db")], env=BASE_ENV, capture_output=True,
                         text=True, timeout=300, check=True)  # fmt: skip
    longest = min(0.3, (time.perf_counter() - started) / 8)  # six lives cover under the whole run
    db = tmp_path / "killed.db"
    # the same keys as the reference run (a demo keeps its keyring beside its db): the same shoes
    shutil.copyfile(tmp_path / "ref.db.keyring.json", tmp_path / "killed.db.keyring.json")

    def work(ready: Callable[[], None]) -> None:
        ready()
        assert main([*args, "--quiet", "--resume", "--db", str(db)]) == 0

    report = run_with_kills(
        work, kills=6, seed=8, min_delay_s=longest / 6, max_delay_s=longest, timeout_s=300
    )
    assert report.kills == 6
    assert log_streams(db, signed_heads=False) == log_streams(tmp_path / "ref.db", signed_heads=False)
    again = subprocess.run([*CLI, *args[:1], "--resume", "--db", str(db)], env=BASE_ENV, capture_output=True,
                           text=True, timeout=300, check=False)  # fmt: skip
    assert again.returncode == 0, again.stderr
    digest = [line for line in ref.stdout.splitlines() if line.startswith("digest:")]
    assert digest and digest == [line for line in again.stdout.splitlines() if line.startswith("digest:")]
