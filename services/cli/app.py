# ruff: noqa: E501 (a table of commands: one option per decorator reads best)

"""The parser of ``casino-ledger``: click commands with rich help (rich-click).

Every option says what it is, its choices and its default; ``--version``; shell completion
(``casino-ledger completion bash|zsh|fish`` prints the script). A command's callback does no work: it
returns the options as an :class:`argparse.Namespace` with the handler in ``func``, which
:func:`services.cli.main` runs under the command line's error rules. Handlers are imported when they
run: ``--help`` loads no processor, no broker client and no database driver.

A bad invocation is one line on stderr and exit status 2, as every other bad input.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import rich_click as click
from click.shell_completion import get_completion_class

PROG = "casino-ledger"
SHELLS = ("bash", "zsh", "fish")

click.rich_click.SHOW_ARGUMENTS = True
click.rich_click.OPTIONS_TABLE_COLUMN_TYPES = ["required", "opt_long", "opt_short", "metavar", "help"]


class Choice(click.Choice[Any]):
    """click's Choice whose list may be loaded when first needed (the variants: only for ``deal`` and
    ``odds``), and whose error says ``invalid choice`` and lists the choices, as argparse did."""

    def __init__(self, choices: Sequence[Any] = (), load: Callable[[], Iterable[Any]] | None = None) -> None:
        self._load = load
        super().__init__(choices)

    @property
    def choices(self) -> tuple[Any, ...]:
        """The choices (loaded on first use)."""
        if self._load is not None:
            self._choices = tuple(self._load())
            self._load = None
        return self._choices

    @choices.setter
    def choices(self, value: Sequence[Any]) -> None:
        self._choices = tuple(value)

    def get_invalid_choice_message(self, value: Any, ctx: click.Context | None) -> str:
        """argparse's words, which scripts and tests match."""
        return f"invalid choice: {value!r} (choose from {', '.join(map(str, self.choices))})"


class ChoiceOption(click.Option):
    """An option whose help ends with its choices, listed when the help is shown (a lazy :class:`Choice`
    loads them only then)."""

    @property
    def help(self) -> str | None:
        """The help text, then the choices."""
        choices = ", ".join(map(str, self.type.choices)) if isinstance(self.type, click.Choice) else ""
        return f"{self._help or ''} One of: {choices}.".strip()

    @help.setter
    def help(self, value: str | None) -> None:
        self._help = value


def _variants() -> Iterable[str]:
    from services.core.baccarat import VARIANTS  # noqa: PLC0415

    return sorted(VARIANTS)


def _severities() -> Iterable[str]:
    from services.cli.alerts import SEVERITIES  # noqa: PLC0415

    return SEVERITIES


def _handler(module: str, name: str) -> Callable[[argparse.Namespace], int]:
    """``module.name``, imported when the command runs."""

    def run(args: argparse.Namespace) -> int:
        result: int = getattr(importlib.import_module(module), name)(args)
        return result

    run.__name__ = name
    return run


def _done(command: str, func: Callable[[argparse.Namespace], int], **options: Any) -> argparse.Namespace:
    """The parsed options as the handlers take them (repeatable options: a list, or ``None`` unused)."""
    values = {k: (list(v) or None) if isinstance(v, tuple) else v for k, v in options.items()}
    return argparse.Namespace(command=command, func=func, **values)


def _one_of(ctx: click.Context, options: dict[str, Any], *names: str) -> None:
    """Exactly one of ``names`` (dest names) is given; else a usage error in argparse's words."""
    given = [n for n in names if options.get(n) is not None]
    flags = [f"--{n.replace('_', '-')}" for n in names]
    if not given:
        raise click.UsageError(f"one of the arguments {' '.join(flags)} is required", ctx)
    if len(given) > 1:
        a, b = (f"--{n.replace('_', '-')}" for n in given[:2])
        raise click.UsageError(f"argument {b}: not allowed with argument {a}", ctx)


def _cli(name: str) -> Callable[[argparse.Namespace], int]:
    """A handler of :mod:`services.cli` itself."""
    return _handler("services.cli", name)


@click.group(
    name=PROG,
    help="An event-sourced ledger for baccarat tables: play, replay, audit and operate it. "
    "Errors: one line on stderr; exit 2 for bad input or what an operator can fix, 70 for a bug "
    "(CASINO_DEBUG=1 shows the traceback), 130 interrupted. Docs: docs/ in the repository.",
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(package_name="casino-ledger", prog_name=PROG, message="%(prog)s %(version)s")
def cli() -> None:
    """The command group."""


# ---------------------------------------------------------------------------------------- play


@cli.command(short_help="Run the main job on the embedded SQLite log (or Kafka).")
@click.option("--tables", type=int, default=None, help="Tables to open, one per variant then round again "
              "(1 to 1,000).  [default: one per variant]")  # fmt: skip
@click.option("--coups", type=int, default=None, help="Coups per table (1 to 100,000).  [default: 60]")
@click.option("--seed", type=int, default=None, help="The session's seed.  [default: 2026]")
@click.option(
    "--db", default=None, metavar="PATH", help="SQLite log to write.  [default: var/demo-seed<SEED>.db]"
)
@click.option("--resume", is_flag=True, help="Continue the interrupted session in --db.")
@click.option("--force", is_flag=True, help="Replace an existing --db file (and its keyring).")
@click.option("--kafka", default=None, metavar="HOST:PORT", help="Drive the session through Kafka, each "
              "service a worker process.")  # fmt: skip
@click.option("--seamless", is_flag=False, flag_value="", default=None, metavar="[URL]",
              help="Play against an operator's seamless wallet at URL (CASINO_SEAMLESS_SECRET signs), or the "
              "reference wallet on a loopback port when no URL is given.")  # fmt: skip
@click.option("--quiet", is_flag=True, help="Print nothing (the exit status tells the verdict).")
def demo(**o: Any) -> argparse.Namespace:
    """Open tables of every variant, fund seeded players, play the coups through the dealer, settlement,
    audit and monitor, then print per table: coups, bets, handle, paid back, commission, result and
    hold % (with a legend), the audit verdict and where the log is. Exit 1 if the audit finds anything."""
    return _done("demo", _cli("cmd_demo"), **o)


@cli.command(short_help="Resolve one coup from a given card order (JSON).")
@click.option("--variant", cls=ChoiceOption, required=True, type=Choice(load=_variants), metavar="VARIANT",
              help="The game's rules.")  # fmt: skip
@click.option("--cards", default=None, metavar="CARDS", help='Card order, e.g. "9S KH 2D 3C 4H 5S".')
@click.option("--batch", is_flag=True, help="One card list per stdin line, one compact JSON line each.")
@click.option("--decks", type=int, default=None, help="Decks in the shoe.  [default: the variant's own]")
@click.option("--strategy", default=None, metavar="NAME", help="Named strategy for optional draws.  "
              "[default: the variant's own, if any]")  # fmt: skip
def deal(**o: Any) -> argparse.Namespace:
    """Resolve one coup (or one per stdin line with --batch): hands, totals, outcome, natural, cards
    used."""
    return _done("deal", _cli("cmd_deal"), **o)


@cli.command(short_help="Exact probabilities and house edge by full enumeration.")
@click.option("--variant", cls=ChoiceOption, required=True, type=Choice(load=_variants), metavar="VARIANT",
              help="The game's rules.")  # fmt: skip
@click.option("--decks", type=int, default=None, help="Decks in the shoe.  [default: the variant's own]")
@click.option("--json", "json", is_flag=True, help="Print one JSON object instead of text.")
def odds(**o: Any) -> argparse.Namespace:
    """Exact probabilities and house edge of every bet, by full enumeration; each figure says what it
    includes."""
    return _done("odds", _cli("cmd_odds"), **o)


@cli.command(short_help="Dispute calculator: one coup and its bets in, every payout out (JSON).")
@click.option("--in", "infile", default=None, metavar="FILE", help="The coup as JSON.  [default: stdin]")
def settle(**o: Any) -> argparse.Namespace:
    """One coup and its bets in; acceptance, result, every payout and posting out, computed by the
    dealer and settlement themselves."""
    return _done("settle", _cli("cmd_settle"), **o)


# ------------------------------------------------------------------------------ log and audit


@cli.command(short_help="Every event of the log as JSONL, in log order.")
@click.option("--db", required=True, metavar="PATH", help="The SQLite log to read.")
@click.option("--out", required=True, metavar="FILE", help="File to write, '-' for stdout (the summary line "
              "then goes to stderr).")  # fmt: skip
def export(**o: Any) -> argparse.Namespace:
    """Every event of the log, one envelope per line, in log order; prints {"exported": N, "out": FILE}."""
    return _done("export", _cli("cmd_export"), **o)


@cli.command(short_help="Regulatory replay of a log; exit 1 on any finding.")
@click.option("--db", default=None, metavar="PATH", help="Source: an embedded SQLite log.")
@click.option("--jsonl", default=None, metavar="FILE", help="Source: an export (one envelope per line).")
@click.option("--kafka", default=None, metavar="HOST:PORT", help="Source: the topics on a broker "
              "(CASINO_TOPIC_PREFIX).")  # fmt: skip
@click.option("--json", "json", is_flag=True, help="Print the JSON report instead of text.")
@click.option("--html", default=None, metavar="FILE", help="Write the human report (or with --coup, the "
              "coup's page) to FILE.")  # fmt: skip
@click.option("--table", multiple=True, metavar="TABLE", help="Limit to this table (repeatable).  "
              "[default: every table]")  # fmt: skip
@click.option(
    "--since", default=None, metavar="ISO", help="Scope: records at or after this ISO 8601 instant."
)
@click.option("--until", default=None, metavar="ISO", help="Scope: records before this ISO 8601 instant.")
@click.option("--coup", default=None, metavar="ID", help="Print one game round in full (with --html: write "
              "it there).")  # fmt: skip
@click.option("--keys", default=None, metavar="PUBLIC", help="Public keyring for the signed checkpoints.  "
              "[default: $CASINO_PUBLIC_KEYRING, else the one beside --db]")  # fmt: skip
@click.option("--expect", default=None, metavar="HEADS", help="A tree head written by 'heads': the log must "
              "extend it (not truncated, rolled back or forked).")  # fmt: skip
@click.pass_context
def replay(ctx: click.RichContext, /, **o: Any) -> argparse.Namespace:
    """Re-derive everything from the log alone: verdict clean (exit 0), findings or incomplete (exit 1);
    an empty or foreign source, an unknown table: exit 2. Exactly one of --db, --jsonl, --kafka."""
    _one_of(ctx, o, "db", "jsonl", "kafka")
    return _done("replay", _cli("cmd_replay"), **o)


@cli.command(short_help="The current signed tree head of a log (JSON), to publish or pin.")
@click.option("--db", default=None, metavar="PATH", help="Source: an embedded SQLite log.")
@click.option("--kafka", default=None, metavar="HOST:PORT", help="Source: the topics on a broker "
              "(CASINO_TOPIC_PREFIX).")  # fmt: skip
@click.option("--keys", default=None, metavar="PUBLIC", help="Public keyring for the fingerprint and the "
              "signature.  [default: $CASINO_PUBLIC_KEYRING, else the one beside --db]")  # fmt: skip
@click.pass_context
def heads(ctx: click.RichContext, /, **o: Any) -> argparse.Namespace:
    """Audit's latest signed tree head: root, chains covered, its checkpoint, key id, fingerprint and
    signature; keep it and later run replay --expect FILE. Exit 1 when it does not verify, 2 when the
    source holds none. Exactly one of --db, --kafka."""
    _one_of(ctx, o, "db", "kafka")
    return _done("heads", _handler("services.runtime.heads", "heads_main"), **o)


@cli.command(short_help="The monitor's alerts of a log, each explained.")
@click.option("--db", required=True, metavar="PATH", help="The SQLite log.")
@click.option("--table", default=None, metavar="TABLE", help="Only this table's alerts.")
@click.option("--account", default=None, metavar="ACCOUNT", help="Only this account's alerts.")
@click.option("--severity", cls=ChoiceOption, type=Choice(load=_severities), default=None, metavar="SEVERITY",
              help="The least severity shown (default: all).")  # fmt: skip
@click.option("--since", default=None, metavar="ISO", help="Only alerts at or after this ISO 8601 instant.")
@click.option("--json", "json", is_flag=True, help="Print JSON instead of text.")
def alerts(**o: Any) -> argparse.Namespace:
    """What was seen, the threshold, the probability under honest play, the event ids; ends with the
    count by severity."""
    return _done("alerts", _handler("services.cli.alerts", "cmd_alerts"), **o)


@cli.command("monitor-eval", short_help="Measure the monitor against honest players and adversaries.")
@click.option("--quick", is_flag=True, help="A small run (for the tests: a minute or two).")
@click.option("--full", is_flag=True, help="The whole evaluation (about 25 minutes on two cores).")
@click.option(
    "--runs", type=int, default=None, help="Runs per adversary case.  [default: 3; quick 1; full 3]"
)
@click.option("--rounds", type=int, default=None, help="Coups per adversary run.  [default: per case]")
@click.option("--honest-coups", type=int, default=None,
              help="Coups per light honest population.  [default: 2,000; quick 150; full 10,000]")  # fmt: skip
@click.option("--crowded-coups", type=int, default=None, help="Coups of the 60-player table (the 300-player "
              "table plays a fifth).  [default: a tenth of --honest-coups; full 6,000]")  # fmt: skip
@click.option("--jobs", type=int, default=None, help="Worker processes.  [default: the machine's cores]")
@click.option("--no-progress", is_flag=True, help="No progress bar on stderr.")
@click.option("--only", multiple=True, metavar="PART",
              help="Only this part: 'honest' or an adversary ('shoe bias', 'syndicate', ...); repeatable.")  # fmt: skip
@click.pass_context
def monitor_eval(ctx: click.RichContext, /, **o: Any) -> argparse.Namespace:
    """False alarms per 10,000 coups of each honest population; per adversary over its parameter range,
    coups to detection beside a plain cumulative z >= 5 test on the same log."""
    if o["quick"] and o["full"]:
        raise click.UsageError("argument --full: not allowed with argument --quick", ctx)
    return _done("monitor-eval", _handler("services.cli.alerts", "cmd_monitor_eval"), **o)


@cli.command(short_help="Outside records into the embedded log, then run the pipeline.")
@click.option("--db", required=True, metavar="PATH", help="The SQLite log (created if missing).")
@click.option("--as", "as_", multiple=True, metavar="PRINCIPAL", help='Sign each record as this principal '
              '(repeatable; a line\'s "as" picks).  [default: records arrive signed]')  # fmt: skip
@click.argument("file", default="-", required=False)
def ingest(**o: Any) -> argparse.Namespace:
    """Outside writers' JSON lines (FILE, default stdin) into the embedded log, then the pipeline until
    idle; prints a JSON summary. Exit 2 and nothing written if a line is unreadable."""
    return _done("ingest", _cli("cmd_ingest"), **o)


@cli.command(short_help="The operator's seamless-wallet export against our log.")
@click.option("--operator", required=True, metavar="FILE", help="The operator's export (JSON or CSV).")
@click.option("--db", default=None, metavar="PATH", help="Ours: an embedded SQLite log.")
@click.option("--jsonl", default=None, metavar="FILE", help="Ours: an export (one envelope per line).")
@click.option("--json", "json", is_flag=True, help="Print one JSON object.")
@click.pass_context
def reconcile(ctx: click.RichContext, /, **o: Any) -> argparse.Namespace:
    """Every difference between the operator's transactions and ours, one per line; exit 1 when there is
    one. Exactly one of --db, --jsonl."""
    _one_of(ctx, o, "db", "jsonl")
    return _done("reconcile", _cli("cmd_reconcile"), **o)


# ------------------------------------------------------------------------------ keys


@cli.group(no_args_is_help=False, short_help="Keyrings: secrets per principal, and their public half.")
def keys() -> None:
    """Keyrings (docs/trust.md)."""


@keys.command("new", short_help="Write a keyring with a fresh secret per principal (mode 0600).")
@click.option("--out", default=None, metavar="FILE", help="The keyring file to create (never overwritten).")
@click.option(
    "--split", default=None, metavar="DIR",
    help="Write one key file per principal (its own secrets only) and public-keyring.json into DIR.",
)  # fmt: skip
def keys_new(**o: Any) -> argparse.Namespace:
    """A keyring with a fresh secret per principal, mode 0600; CASINO_KEYRING names it for every
    command and worker."""
    return _done("keys", _cli("cmd_keys_new"), keys_command="new", **o)


@keys.command("public", short_help="The public half of a keyring, for regulators.")
@click.option("--in", "keyring_in", required=True, metavar="KEYRING", help="The keyring file (secrets).")
@click.option(
    "--out", required=True, metavar="PUBLIC", help="The public keyring to write (keys in it are kept)."
)
def keys_public(**o: Any) -> argparse.Namespace:
    """The audit's Ed25519 checkpoint keys, public half only; keys already in PUBLIC are kept."""
    return _done(
        "keys", _handler("services.runtime.keys_public", "keys_public_main"), keys_command="public", **o
    )


@keys.command("split", short_help="An existing keyring's key files, one per principal (mode 0600).")
@click.option("--in", "keyring_in", required=True, metavar="KEYRING", help="The keyring file (secrets).")
@click.option("--out", required=True, metavar="DIR", help="Where to write <principal>.json and "
              "public-keyring.json (files there are never overwritten).")  # fmt: skip
def keys_split(**o: Any) -> argparse.Namespace:
    """KEYRING split into one key file per principal, as `keys new --split` writes them for a new one:
    e.g. the back office's own key file of a log's keyring, for `serve --db` beside `pipeline`."""
    return _done("keys", _cli("cmd_keys_split"), keys_command="split", **o)


# ------------------------------------------------------------------------------ Kafka


@cli.command(short_help="Run one Kafka stream processor (faust worker).")
@click.argument(
    "name", metavar="NAME", type=Choice(["dealer", "settlement", "audit", "monitor", "audit-tree"])
)
@click.option("--broker", default=None, metavar="HOST:PORT", help="The broker.  [default: "
              "$CASINO_BOOTSTRAP_SERVERS]")  # fmt: skip
def worker(**o: Any) -> argparse.Namespace:
    """One service's processor on Kafka (NAME: dealer, settlement, audit, monitor or audit-tree), configured by
    CASINO_* (docs/operations.md); exit 70 when a record fails (the orchestrator restarts it), 0 after
    SIGTERM."""
    return _done("worker", _cli("cmd_worker"), **o)


@cli.command("seamless-caller", short_help="Run the seamless wallet's HTTP caller on Kafka (one replica).")
def seamless_caller(**o: Any) -> argparse.Namespace:
    """Make the operator wallet calls that settlement's seamless adapter requests
    (casino.wallet.events) and record the answers (casino.wallet.requests); configured by CASINO_*
    (CASINO_SEAMLESS_URL and CASINO_SEAMLESS_SECRET at least). Run exactly one (docs/integration.md)."""
    return _done("seamless-caller", _handler("services.cli.seamless_caller", "main_args"), **o)


@cli.group(no_args_is_help=False, short_help="Kafka topic administration.")
def topics() -> None:
    """Kafka topics of the contract (schemas/topics.yaml)."""


@topics.command("create", short_help="Create the topics of the contract that do not exist yet (idempotent).")
@click.option("--broker", default=None, metavar="HOST:PORT[,...]", help="The brokers.  [default: "
              "$CASINO_BOOTSTRAP_SERVERS]")  # fmt: skip
@click.option("--spec", default=None, metavar="PATH", help="Topic list.  [default: $CASINO_TOPIC_SPEC, else "
              "schemas/topics.yaml]")  # fmt: skip
def topics_create(**o: Any) -> argparse.Namespace:
    """The deploy's topic job: every topic of the list that does not exist yet, with its partitions,
    replication and retention; a topic that exists is left as it is."""
    return _done(
        "topics",
        _handler("services.cli.worker", "topics_create_main"),
        topics_command="create",
        **o,
    )


# ------------------------------------------------------------------------------ back office


def _periods(f: Callable[..., Any]) -> Callable[..., Any]:
    f = click.option("--shift-hours", cls=ChoiceOption, type=Choice([1, 2, 3, 4, 6, 8, 12, 24]), default=8,
                     show_default=True, metavar="H", help="Length of a shift, hours.")(f)  # fmt: skip
    return click.option("--day-cutoff", type=click.IntRange(0, 23), default=6, show_default=True,
                        metavar="HOUR", help="Hour (UTC) at which a gaming day starts.")(f)  # fmt: skip


def _bo(name: str) -> Callable[[argparse.Namespace], int]:
    return _handler("services.cli.backoffice", name)


@cli.command(short_help="The back-office HTTP API and page over the read model.")
@click.option("--db", default=None, metavar="PATH", help="The embedded log (the read model lives beside it).")
@click.option("--kafka", default=None, metavar="HOST:PORT", help="Commands to the Kafka topics; reads from "
              "CASINO_READ_DB, kept by `project --kafka --follow`.")  # fmt: skip
@click.option("--port", type=int, default=8000, show_default=True, help="TCP port.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--keyring", default=None, metavar="FILE", help="Keyring with the API keys.  [default: "
              "$CASINO_KEYRING]")  # fmt: skip
@click.option("--wait", type=float, default=15.0, show_default=True, metavar="S",
              help="With --kafka, or --db on the back office's key alone: longest wait (seconds) "
              "for a command's outcome.")  # fmt: skip
@_periods
@click.pass_context
def serve(ctx: click.RichContext, /, **o: Any) -> argparse.Namespace:
    """Serve the API (OpenAPI at /docs) and the page over the read model beside --db (or, with --kafka,
    in CASINO_READ_DB). Exactly one of --db, --kafka."""
    _one_of(ctx, o, "db", "kafka")
    return _done("serve", _bo("cmd_serve"), **o)


@cli.command(short_help="Run the embedded log's pipeline in a process of its own (for serve on the "
             "back office's key alone).")  # fmt: skip
@click.option("--db", required=True, metavar="PATH", help="The embedded log.")
@click.option("--keyring", default=None, metavar="FILE", help="The keyring the log was written with (the "
              "services' keys).  [default: $CASINO_KEYRING]")  # fmt: skip
@click.option("--follow", is_flag=True, help="Keep running: again whenever records arrive (else stop when "
              "idle). SIGTERM stops it.")  # fmt: skip
def pipeline(**o: Any) -> argparse.Namespace:
    """Run the processors on the embedded log until idle (--follow: and whenever new records arrive), with
    the services' keys, so that `serve --db` can run on the back office's key file alone. One per log."""
    return _done("pipeline", _handler("services.cli.pipeline", "cmd_pipeline"), **o)


@cli.group(no_args_is_help=False, short_help="API keys for serve.")
def apikey() -> None:
    """API keys for serve."""


@apikey.command("new", short_help="Create an API key: printed once, only its hash is kept.")
@click.option("--role", cls=ChoiceOption, required=True, metavar="ROLE",
              type=Choice(["auditor", "cashier", "operator", "terminal", "admin"]), help="What the key may do.")  # fmt: skip
@click.option("--keyring", default=None, metavar="FILE", help="Keyring (created if missing).  [default: "
              "$CASINO_KEYRING]")  # fmt: skip
def apikey_new(**o: Any) -> argparse.Namespace:
    """A new API key, printed once on stdout; only its sha256 hash is kept in the keyring."""
    return _done("apikey", _bo("cmd_apikey"), apikey_command="new", **o)


@apikey.command("revoke", short_help="Revoke an API key: a running serve refuses it on its next request.")
@click.argument("key_id", metavar="KEY_ID")
@click.option("--keyring", default=None, metavar="FILE", help="Keyring holding the key.  [default: "
              "$CASINO_KEYRING]")  # fmt: skip
def apikey_revoke(**o: Any) -> argparse.Namespace:
    """Remove the API key KEY_ID (as ``apikey new`` printed it: ``role-xxxxxxxx``) from the keyring; a
    running ``serve`` refuses it from its next request on."""
    return _done("apikey", _bo("cmd_apikey"), apikey_command="revoke", **o)


@cli.command(short_help="Bring the read model up to date with the log (or Kafka).")
@click.option("--db", default=None, metavar="PATH", help="The embedded log (the read model beside it, or "
              "CASINO_READ_DB).")  # fmt: skip
@click.option("--kafka", default=None, metavar="HOST:PORT", help="Consume the topics into CASINO_READ_DB.")
@click.option("--follow", is_flag=True, help="With --kafka: keep consuming (else stop when idle).")
@click.option("--rebuild", is_flag=True, help="Drop the projected rows and project again.")
@_periods
@click.pass_context
def project(ctx: click.RichContext, /, **o: Any) -> argparse.Namespace:
    """Project whatever the read model lacks. Exactly one of --db, --kafka."""
    _one_of(ctx, o, "db", "kafka")
    return _done("project", _bo("cmd_project"), **o)


def _tabular(f: Callable[..., Any]) -> Callable[..., Any]:
    f = click.option("--out", default="-", show_default=True, metavar="FILE", help="File ('-': stdout).")(f)
    return click.option("--format", cls=ChoiceOption, type=Choice(["json", "csv"]), default="json",
                        show_default=True, metavar="FORMAT", help="Output format.")(f)  # fmt: skip


def _read_model_flag(f: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--read-model", is_flag=True, help="Read CASINO_READ_DB as it is (a Kafka "
                        "deployment's, kept by `project --kafka --follow`) instead of --db.")(f)  # fmt: skip


@cli.command(short_help="An account's statement as JSON or CSV.")
@click.option("--db", default=None, metavar="PATH", help="The embedded log (or --read-model).")
@_read_model_flag
@click.option("--account", required=True, metavar="ID", help="The account.")
@click.option(
    "--since", default=None, metavar="ISO", help="From this instant.  [default: the first transfer]"
)
@click.option("--until", default=None, metavar="ISO", help="Before this instant.  [default: now]")
@_tabular
@_periods
def statement(**o: Any) -> argparse.Namespace:
    """Each transfer of the account with the balance after it."""
    return _done("statement", _bo("cmd_statement"), **o)


@cli.command(short_help="Table results per gaming day (or shift) as JSON or CSV.")
@click.option("--db", default=None, metavar="PATH", help="The embedded log (or --read-model).")
@_read_model_flag
@click.option("--table", multiple=True, metavar="TABLE", help="A table (repeatable).  [default: all]")
@click.option(
    "--day", default=None, metavar="YYYY-MM-DD", help="Gaming day.  [default: the latest with play]"
)
@click.option("--shifts", is_flag=True, help="One line per shift.")
@_tabular
@_periods
def report(**o: Any) -> argparse.Namespace:
    """Coups, bets, handle, win, commission and hold % per table and gaming day."""
    return _done("report", _bo("cmd_report"), **o)


# ------------------------------------------------------------------------------ the shell


@cli.command(short_help="Print the shell completion script (bash, zsh or fish).")
@click.argument("shell", metavar="SHELL", type=Choice(SHELLS))
def completion(**o: Any) -> argparse.Namespace:
    """Print the completion script of SHELL (bash, zsh or fish); e.g. in ~/.bashrc:
    eval "$(casino-ledger completion bash)"."""
    return _done("completion", print_completion, **o)


def print_completion(args: argparse.Namespace) -> int:
    """Write the completion script of ``args.shell`` to stdout."""
    cls = get_completion_class(args.shell)
    assert cls is not None  # SHELLS are click's own
    sys.stdout.write(cls(cli, {}, PROG, "_CASINO_LEDGER_COMPLETE").source() + "\n")
    return 0


# ------------------------------------------------------------------------------ parsing


def parse_args(argv: list[str]) -> argparse.Namespace | int:
    """The parsed options of ``argv``, or the exit status when parsing ended the run: 0 after ``--help``
    or ``--version``; 2 after a bad invocation, its one line on stderr."""
    if not argv:
        return _usage("a command is required (see --help for the list)")
    try:
        result = cli.main(args=argv, prog_name=PROG, standalone_mode=False)
    except click.UsageError as exc:
        where = exc.ctx.command_path if exc.ctx is not None else PROG
        message = " ".join(exc.format_message().split()).rstrip(".")
        return _usage(f"{where}: {message[:1].lower()}{message[1:]} (see --help)")
    except click.ClickException as exc:
        return _usage(" ".join(exc.format_message().split()))
    except click.Abort:
        raise KeyboardInterrupt from None
    if isinstance(result, argparse.Namespace):
        return result
    return int(result or 0)  # --help, --version: click already printed and returned its status


def _usage(message: str) -> int:
    print(f"casino-ledger: error: {message}", file=sys.stderr)
    return 2
