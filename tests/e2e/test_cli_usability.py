# ruff: noqa: E501 (subprocess calls with their options on one line read best)

"""The command line as a person on call meets it (issue #15): help for every option with its choices and
defaults, ``--version``, shell completion, ``--help`` without the heavy imports, ``export --out -``,
``replay --coup --html``, and the demo's tables at 80 columns with every money cell whole."""

from __future__ import annotations

import importlib.metadata
import io
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import click
import pytest
from rich.console import Console

from services.cli import main
from services.cli.app import cli
from services.cli.demo import COLUMNS, TableSummary, plural, render_tables
from services.core.baccarat import VARIANTS
from services.core.figures import Figures

CLI = [sys.executable, "-m", "services.cli"]
ENV = {**os.environ, "LOG_LEVEL": "WARNING"}


def _commands(group: click.Group, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], click.Command]]:
    out: list[tuple[tuple[str, ...], click.Command]] = []
    for name, command in sorted(group.commands.items()):
        out.append(((*path, name), command))
        if isinstance(command, click.Group):
            out.extend(_commands(command, (*path, name)))
    return out


COMMANDS = _commands(cli)


def test_the_contract_commands_are_all_there() -> None:
    """Every command of the contract (and the new ``completion``) is registered under its old name."""
    names = {" ".join(path) for path, _ in COMMANDS}
    assert names >= {
        "demo", "deal", "odds", "settle", "export", "replay", "keys", "keys new", "keys public", "ingest",
        "reconcile", "worker", "topics", "topics create", "serve", "apikey", "apikey new", "project",
        "statement", "report", "alerts", "monitor-eval", "completion",
    }  # fmt: skip


@pytest.mark.parametrize("path", [p for p, _ in COMMANDS], ids=[" ".join(p) for p, _ in COMMANDS])
def test_every_option_of_every_command_is_explained(
    path: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    """``COMMAND --help`` exits 0 and names every option with a help text; an option with a default
    says it, and an option with a fixed set of values lists them."""
    command = dict(COMMANDS)[path]
    for param in command.params:
        if isinstance(param, click.Option):
            assert param.help, f"{' '.join(path)} {param.opts[0]} has no help"
    assert main([*path, "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    for param in command.params:
        if not isinstance(param, click.Option) or param.hidden:
            continue
        assert param.opts[-1] in out, param.opts
        if param.show_default and param.default is not None and not param.is_flag:
            assert f"[default: {param.default}]" in out, (param.opts, out)
        if isinstance(param.type, click.Choice):
            for choice in param.type.choices:
                assert str(choice) in out, (param.opts, choice)


def test_variant_help_lists_every_variant(capsys: pytest.CaptureFixture[str]) -> None:
    """``deal --help`` and ``odds --help`` list every registered variant by name."""
    for command in ("deal", "odds"):
        assert main([command, "--help"]) == 0
        out = capsys.readouterr().out
        assert all(v in out for v in VARIANTS), out


def test_version_is_the_installed_one() -> None:
    """``--version`` prints the package's version and exits 0."""
    done = subprocess.run(
        [*CLI, "--version"], capture_output=True, text=True, env=ENV, timeout=60, check=False
    )
    assert done.returncode == 0
    assert done.stdout.strip() == f"casino-ledger {importlib.metadata.version('casino-ledger')}"


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_prints_a_script_for_each_shell(shell: str) -> None:
    """``completion SHELL`` prints a script that calls back through ``_CASINO_LEDGER_COMPLETE``."""
    done = subprocess.run([*CLI, "completion", shell], capture_output=True, text=True, env=ENV, timeout=60,
                          check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "_CASINO_LEDGER_COMPLETE" in done.stdout and "casino-ledger" in done.stdout


def test_completion_completes_commands_and_choices() -> None:
    """Asked as bash asks, the program completes a command name and a choice's values."""

    def complete(words: str) -> list[str]:
        env = {**ENV, "_CASINO_LEDGER_COMPLETE": "bash_complete", "COMP_WORDS": words,
               "COMP_CWORD": str(len(shlex.split(words)) - (0 if words.endswith(" ") else 1))}  # fmt: skip
        done = subprocess.run([sys.executable, "-c", "import sys; from services.cli.app import cli; "
                               "cli.main(prog_name='casino-ledger')"], env=env, capture_output=True, text=True,
                              timeout=60, check=False)  # fmt: skip
        return [line.split(",", 1)[1] for line in done.stdout.splitlines() if "," in line]

    assert "replay" in complete("casino-ledger rep")
    assert set(complete("casino-ledger worker ")) == {"dealer", "settlement", "audit", "monitor", "audit-tree"}
    assert set(complete("casino-ledger deal --variant ")) == set(VARIANTS)


def test_help_loads_no_processor_broker_or_database() -> None:
    """``--help`` of the program and of ``replay`` import neither the rules, the runtime, faust, aiokafka
    nor SQLAlchemy (each handler imports its own when it runs)."""
    code = ("import sys, contextlib, io\nfrom services.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n    main(['--help']); main(['replay', '--help'])\n"
            "heavy = ('faust', 'aiokafka', 'sqlalchemy', 'services.runtime', 'services.core.baccarat', 'pydantic')\n"
            "print(sorted(m for m in sys.modules if m.startswith(heavy)))")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ENV, timeout=60,
                          check=True)  # fmt: skip
    assert done.stdout.strip() == "[]", done.stdout


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["keys"], "missing command"),
        (["topics"], "missing command"),
        (["replay", "--db", "a", "--jsonl", "b"], "not allowed"),
        (["reconcile", "--operator", "x"], "one of the arguments --db --jsonl"),
        (["project"], "one of the arguments --db --kafka"),
        (["serve", "--db", "x", "--day-cutoff", "24"], "--day-cutoff"),
        (["statement", "--db", "x", "--account", "a", "--format", "xml"], "invalid choice"),
        (["completion", "powershell"], "invalid choice"),
        (["demo", "--bogus"], "--bogus"),
    ],
)
def test_more_bad_invocations_are_one_line_and_status_2(
    argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Missing sub-commands, clashing or missing sources, out-of-range values: one line, exit 2."""
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("casino-ledger: error:") and err.count("\n") == 1, err
    assert needle in err, err


@pytest.fixture(scope="module")
def small_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real demo log: 1 table, 3 coups."""
    db = tmp_path_factory.mktemp("small") / "small.db"
    assert main(["demo", "--seed", "3", "--tables", "1", "--coups", "3", "--db", str(db), "--quiet"]) == 0
    return db


def test_export_to_dash_writes_the_log_to_stdout(small_log: Path, tmp_path: Path) -> None:
    """``export --out -`` writes to stdout exactly what ``--out FILE`` writes to the file, no file named
    ``-`` appears, and the summary line goes to stderr."""
    to_file = tmp_path / "x.jsonl"
    done = subprocess.run([*CLI, "export", "--db", str(small_log), "--out", str(to_file)], capture_output=True,
                          env=ENV, timeout=60, check=True, cwd=tmp_path)  # fmt: skip
    assert json.loads(done.stdout) == {
        "exported": len(to_file.read_bytes().splitlines()),
        "out": str(to_file),
    }
    dash = subprocess.run([*CLI, "export", "--db", str(small_log), "--out", "-"], capture_output=True,
                          env=ENV, timeout=60, check=True, cwd=tmp_path)  # fmt: skip
    assert dash.stdout == to_file.read_bytes()
    assert json.loads(dash.stderr) == {"exported": len(to_file.read_bytes().splitlines()), "out": "-"}
    assert not (tmp_path / "-").exists()


def test_replay_of_one_coup_to_html_writes_the_file_and_says_so(small_log: Path, tmp_path: Path) -> None:
    """``replay --coup ID --html FILE`` writes the coup's page and names the file it wrote."""
    records = [json.loads(line) for line in subprocess.run(
        [*CLI, "export", "--db", str(small_log), "--out", "-"], capture_output=True, env=ENV, timeout=60,
        check=True).stdout.splitlines()]  # fmt: skip
    coup = next(r["payload"]["coup_id"] for r in records if r["type"] == "CoupResolved")
    page = tmp_path / "coup.html"
    done = subprocess.run([*CLI, "replay", "--db", str(small_log), "--coup", coup, "--html", str(page)],
                          capture_output=True, text=True, env=ENV, timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert str(page) in done.stdout + done.stderr
    assert coup in page.read_text(encoding="utf-8")


def _summaries(big: bool) -> dict[str, TableSummary]:
    scale = 1_000_003 if big else 1
    rows = {}
    for i, variant in enumerate(sorted(VARIANTS)):
        handle = (2_156_760 + 91_234 * i) * scale
        paid = handle - (147_683 - 61_000 * i) * scale  # some tables lose: negative results
        banked = not VARIANTS[variant].house_banked
        figures = Figures(coups=60, bets=290 + i, refused=i, handle_minor=handle, paid_minor=paid,
                          commission_minor=12_758 * scale, bank_minor=(-31_417 + 9_000 * i) * scale if banked else 0)  # fmt: skip
        rows[f"T{i:02d}-{variant.replace('_', '-')}"] = TableSummary(
            f"T{i:02d}-{variant.replace('_', '-')}", variant, "EUR", figures
        )
    return rows


def _money(minor: int) -> str:
    sign = "-" if minor < 0 else ""
    return f"{sign}{abs(minor) // 100:,}.{abs(minor) % 100:02d}"


@pytest.mark.parametrize("width", [80, 60, 132, 30])
@pytest.mark.parametrize("big", [False, True], ids=["tens-of-thousands", "tens-of-billions"])
def test_money_cells_are_whole_at_any_width(width: int, big: bool) -> None:
    """Printed on a console ``width`` columns wide, no line is wider, every money figure of every table
    appears whole as one word, the currency is said, and the legend says what each column is."""
    rows = _summaries(big)
    console = Console(width=width, file=io.StringIO(), color_system=None)
    render_tables(console, rows)
    text = console.file.getvalue()  # type: ignore[attr-defined]
    lines = text.splitlines()
    assert max(map(len, lines)) <= width, text
    words = [set(line.split()) for line in lines]
    for s in rows.values():
        shown = (s.handle_minor, s.paid_minor, s.commission_minor, s.win_minor)
        for minor in (*shown, s.bank_minor) if s.player_banked else shown:
            assert any(_money(minor) in w for w in words), (_money(minor), text)
    assert "EUR" in text
    legend = " ".join(text.split())
    for header, what in COLUMNS:
        assert f"{header}: {' '.join(what.split())}" in legend
    assert "returned" in dict(COLUMNS)["paid back"] and "÷ handle" in dict(COLUMNS)["hold %"]


def test_plurals() -> None:
    """One table, two tables; one variant, seven variants."""
    assert (plural(1, "table"), plural(2, "table"), plural(1_000, "coup")) == (
        "1 table",
        "2 tables",
        "1,000 coups",
    )


def _command_after(out: str, label: str) -> str:
    """The command the demo prints on the line after the one that ends with ``label``: indented two
    spaces, whole on its line however long."""
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.endswith(label))
    assert lines[at + 1].startswith("  "), lines[at : at + 2]
    return lines[at + 1].strip()


def _run_as_printed(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["/bin/sh", "-c", command], capture_output=True, text=True, timeout=300, check=False,
                          cwd=cwd, env={"PATH": "/usr/bin:/bin", "HOME": str(cwd)})  # fmt: skip


@pytest.mark.parametrize("long_path", [False, True], ids=["short-path", "long-path"])
def test_demo_at_80_columns_in_a_fresh_shell(tmp_path: Path, long_path: bool) -> None:
    """The demo run at 80 columns (``COLUMNS=80``, through a pipe) keeps its tables within 80 columns
    with every money cell whole, says "1 table (1 variant)", names every file it wrote, and the commands
    it prints (replay, alerts, the back office's key and serve) run as printed in a fresh shell that has
    no virtualenv on its PATH — also when the log's path is longer than the terminal is wide (each
    command is on a line of its own, never wrapped inside)."""
    exe = Path(sys.executable).parent / "casino-ledger"
    assert exe.exists(), "the console script is installed in the venv"
    cwd = tmp_path / ("a-very-long-directory-name-for-testing-clone-paths" * 2 if long_path else "")
    cwd.mkdir(parents=True, exist_ok=True)
    if long_path:  # the venv as a clone at a long path has it: the hints name this path, 130+ characters
        (cwd / ".venv").symlink_to(Path(sys.executable).parent.parent, target_is_directory=True)
        exe = cwd / ".venv" / "bin" / "casino-ledger"
    db = "logs with spaces/d.db" if long_path else "d.db"
    done = subprocess.run([str(exe), "demo", "--seed", "5", "--tables", "1", "--coups", "4", "--db", db],
                          capture_output=True, text=True, timeout=300, check=True, cwd=cwd,
                          env={**ENV, "COLUMNS": "80", "PATH": "/usr/bin:/bin"})  # fmt: skip
    out = done.stdout
    assert "1 table (1 variant), 4 coups each" in out
    table_part = out.split("coups:")[0]
    assert max(map(len, table_part.splitlines())) <= 80, table_part
    assert "(amounts in EUR)" in out
    money_row = [line for line in table_part.splitlines() if line.strip().startswith("T01")][-1]
    figures = money_row.split()[-5:]
    assert all(re.fullmatch(r"-?\d{1,3}(,\d{3})*\.\d\d", f) for f in figures[:4]), money_row
    wrote = out[out.index("wrote:") :]
    for name in ("d.db", "d.db.keyring.json", "d.db.public-keyring.json"):
        assert name in wrote and (cwd / Path(db).parent / name).exists()
    replay_cmd = _command_after(out, "replayed by:")
    public = shlex.quote(db + ".public-keyring.json")  # the keys named, not found beside the log
    assert replay_cmd.endswith(f"replay --db {shlex.quote(db)} --keys {public}"), replay_cmd
    assert replay_cmd.startswith(str(exe)) and (len(replay_cmd) > 80 or not long_path)
    again = _run_as_printed(replay_cmd, cwd)
    assert again.returncode == 0, again.stderr
    assert "verdict" in again.stdout
    # the alerts hint names this log (it once printed a placeholder, ``--db LOG``) and runs as printed
    command = _command_after(out, "each explained by:")
    assert command.endswith("alerts --db " + shlex.quote(db)), command
    explained = _run_as_printed(command, cwd)
    assert explained.returncode == 0, explained.stderr
    key_cmd = _command_after(out, "(make a key, then serve the log):")
    made = _run_as_printed(key_cmd, cwd)
    assert made.returncode == 0, made.stderr
    assert (cwd / Path(db).parent / "d.db.keyring.json").exists()


def test_report_to_a_file_says_where(
    small_log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``report --out FILE`` writes the file and names it on stderr; ``--out -`` writes JSON to stdout."""
    out = tmp_path / "r.json"
    assert main(["report", "--db", str(small_log), "--out", str(out)]) == 0
    assert f"wrote {out}" in capsys.readouterr().err
    assert main(["report", "--db", str(small_log)]) == 0
    assert json.loads(capsys.readouterr().out) == json.loads(out.read_text(encoding="utf-8"))


def test_a_coup_printed_at_80_columns_wraps_between_words(small_log: Path) -> None:
    """``replay --coup ID`` at 80 columns: no line wider, and the same words as at 1,000 columns (a
    money figure or an id is moved to the next line whole, never cut)."""
    records = [json.loads(line) for line in subprocess.run(
        [*CLI, "export", "--db", str(small_log), "--out", "-"], capture_output=True, env=ENV, timeout=60,
        check=True).stdout.splitlines()]  # fmt: skip
    coup = next(r["payload"]["coup_id"] for r in records if r["type"] == "CoupResolved")

    def view(columns: int) -> str:
        return subprocess.run([*CLI, "replay", "--db", str(small_log), "--coup", coup], capture_output=True,
                              text=True, env={**ENV, "COLUMNS": str(columns)}, timeout=120, check=True).stdout  # fmt: skip

    narrow, wide = view(80), view(1000)
    assert max(map(len, narrow.splitlines())) <= 80, narrow
    assert max(map(len, wide.splitlines())) > 80, "the coup view has long lines to wrap"
    assert narrow.split() == wide.split()
    assert re.search(r"stake \d+\.\d\d", narrow)


def test_demo_in_a_terminal_80_columns_wide(tmp_path: Path) -> None:
    """The demo on a real pseudo-terminal of 80 columns (no ``COLUMNS``: rich asks the terminal) prints
    no table line wider than 80 and every money figure whole, colours and all."""
    import fcntl  # noqa: PLC0415
    import pty  # noqa: PLC0415
    import struct  # noqa: PLC0415
    import termios  # noqa: PLC0415

    controller, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    env = {k: v for k, v in ENV.items() if k not in ("COLUMNS", "LINES")} | {"TERM": "xterm-256color"}
    proc = subprocess.Popen([*CLI, "demo", "--seed", "6", "--tables", "7", "--coups", "3", "--db", "d.db"],
                            stdin=terminal, stdout=terminal, stderr=terminal, cwd=tmp_path, env=env)  # fmt: skip
    os.close(terminal)
    chunks = []
    while True:
        try:
            chunk = os.read(controller, 65536)
        except OSError:  # the terminal closed: the demo is done
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(controller)
    assert proc.wait(120) == 0
    screen = re.sub(
        r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07", "", b"".join(chunks).decode("utf-8", "replace")
    )
    lines = [line.rstrip("\r") for line in screen.replace("\r\n", "\n").split("\n")]
    table = lines[: next(i for i, line in enumerate(lines) if line.startswith("coups:"))]
    assert max(len(line) for line in table if "T0" in line or "handle" in line) <= 80, "\n".join(table)
    money = [line for line in table if re.match(r"\s*T0\d-\S+\s+-?[\d,]+\.\d\d", line)]
    assert len(money) == 7, "\n".join(table)
    for line in money:
        figures = line.split()[1:]
        assert all(re.fullmatch(r"-?\d{1,3}(,\d{3})*\.\d\d", f) for f in figures[:4]), line
    assert "(amounts in EUR)" in screen
