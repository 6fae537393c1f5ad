"""The Kafka worker's entry points: ``casino-ledger worker NAME``, ``casino-ledger topics create`` and
``python -m services.cli.worker NAME [--factory module:attr] | create-topics`` (how the bus, the tests and
the benches start a worker process).

Here the composition root builds the service's processors (:data:`PROCESSORS`), which
:func:`services.runtime.kafka.worker.run_worker` then runs: the runtime shell itself composes nothing.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from services.core.processor import Processor
from services.core.topics import SERVICES
from services.runtime.compose import Composition
from services.runtime.failures import exit_status, one_line
from services.runtime.kafka.topic_io import _settings_for
from services.runtime.kafka.worker import ServiceFactory, create_topics_main, run_worker, topic_spec_path
from services.runtime.settings import Settings
from services.runtime.tuning import tune_gc


def _service(name: str, settings: Settings | None = None) -> ServiceFactory:
    def build() -> Sequence[Processor[Any]]:
        return Composition.from_settings(settings).service(name)

    return build


PROCESSORS: dict[str, ServiceFactory] = {name: _service(name) for name in SERVICES}
"""The services a worker can run: name → factory of its processor(s), each with its own agent, built
by the composition root (:mod:`services.runtime.compose`) from ``CASINO_KEYRING``/``CASINO_DEMO_MODE``."""


def _import_factory(spec: str) -> ServiceFactory:
    module, _, attr = spec.partition(":")
    factory: ServiceFactory = getattr(importlib.import_module(module), attr)
    return factory


def run(name: str, settings: Settings, factory: ServiceFactory | None = None) -> None:
    """Run the service ``name`` (one of :data:`PROCESSORS`, or what ``factory`` builds): never returns."""
    if factory is None and name not in PROCESSORS:
        known = ", ".join(sorted(PROCESSORS)) or "none registered"
        raise SystemExit(f"casino-ledger: error: no Kafka service {name!r} (known: {known})")
    run_worker(name, settings, factory or _service(name, settings))


def worker_main(args: argparse.Namespace) -> int:
    """``casino-ledger worker NAME [--broker kafka://host:port]``."""
    from services.runtime.kafka.preflight import preflight  # noqa: PLC0415

    broker = getattr(args, "broker", None)
    settings = _settings_for(broker, None)
    preflight(settings)  # a missing data folder or a taken port: one line, exit 2 (not faust's traceback)
    run(args.name, settings)
    return 0


def topics_create_main(args: argparse.Namespace) -> int:
    """``casino-ledger topics create [--broker HOST:PORT] [--spec PATH]`` (the deploy's topic job)."""
    try:
        settings = _settings_for(getattr(args, "broker", None), None)
    except ValueError as exc:  # a CASINO_* variable that does not validate
        first = str(exc).splitlines()
        print(f"casino-ledger: error: bad settings: {' '.join(first[:3])}", file=sys.stderr)
        return 2
    spec = getattr(args, "spec", None)
    library = logging.getLogger("aiokafka")
    level = library.level
    library.setLevel(logging.CRITICAL)  # its connection errors: our one line says it
    try:
        return create_topics_main(settings, Path(spec) if spec else topic_spec_path(settings))
    finally:
        library.setLevel(level)


@click.command(name="python -m services.cli.worker")
@click.argument("name")
@click.option("--broker", default=None, help="host:port[,…]  [default: $CASINO_BOOTSTRAP_SERVERS]")
@click.option("--factory", default=None, help="module:callable returning the processor(s) to run.")
@click.option("--spec", default=None, help="Topic list for create-topics.  [default: $CASINO_TOPIC_SPEC]")
def worker_command(name: str, broker: str | None, factory: str | None, spec: str | None) -> int | None:
    """Run the processor NAME (a service of PROCESSORS), or create-topics."""
    try:
        settings = _settings_for(broker, None)
        if name == "create-topics":
            return create_topics_main(settings, Path(spec) if spec else topic_spec_path(settings))
        run(name, settings, _import_factory(factory) if factory else None)
    except Exception as exc:  # the same one line as `casino-ledger worker` for what an operator can fix
        line = one_line(exc)
        if line is None:
            raise
        print(f"casino-ledger: error: {line}", file=sys.stderr)
        return 2
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m services.cli.worker NAME [--factory module:attr] | create-topics [--spec PATH]``
    (exit 2 for a bad invocation or what an operator can fix)."""
    tune_gc()  # as ``casino-ledger worker`` does: the workers of the bus, the tests and the benches
    return exit_status(worker_command, argv)


if __name__ == "__main__":
    sys.exit(main())
