"""``casino-ledger seamless-caller`` (= ``python -m services.cli.seamless_caller``): the seamless adapter's
HTTP caller on Kafka (:mod:`services.integrations.seamless.kafka_caller`), its operator wallet and
settlement's key
given by the composition root."""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Sequence

from services.integrations.seamless import kafka_caller
from services.runtime.compose import Composition
from services.runtime.failures import BadInput, one_line
from services.runtime.kafka.lease import EXIT_LEASE, LeaseLost
from services.runtime.kafka.topic_io import probe
from services.runtime.logging import configure, get_logger
from services.runtime.settings import Settings


async def _until_signalled(settings: Settings) -> None:
    """The caller until SIGTERM or SIGINT: the batch in hand is finished and committed, then a clean
    stop (exit 0), as the workers do."""
    composition = Composition.from_settings(settings)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await kafka_caller.run(settings, composition.seamless, composition.settlement_guard(), stop)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the caller from ``CASINO_*`` settings; a bad setting or unreachable broker: one line, exit 2."""
    del argv
    try:
        settings = Settings()
        configure(level=settings.log_level or None, fmt=settings.log_format)
        probe(settings)
        asyncio.run(_until_signalled(settings))
    except (BadInput, ValueError) as exc:
        print(f"casino-ledger: error: {one_line(exc, None) or exc}", file=sys.stderr)
        return 2
    except LeaseLost as exc:  # another member took over: this one stops (its supervisor restarts it)
        get_logger("casino_ledger.seamless").critical("caller_fenced", error=str(exc))
        return EXIT_LEASE
    except KeyboardInterrupt:
        return 0
    return 0


def main_args(args: object) -> int:
    """``casino-ledger seamless-caller`` (it has no options: everything is a ``CASINO_*`` setting)."""
    del args
    return main()


if __name__ == "__main__":
    sys.exit(main())
