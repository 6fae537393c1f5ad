"""Run every ``bench/bench_*.py`` module's ``main()``, in name order: ``python -m bench [NAME ...]``.

With names (``engine`` or ``bench_engine``), only those benchmarks run.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from services.runtime.tuning import tune_gc


def discover() -> list[str]:
    """The benchmark module names (``bench_*``) in this package, sorted."""
    here = str(Path(__file__).resolve().parent)
    return sorted(m.name for m in pkgutil.iter_modules([here]) if m.name.startswith("bench_"))


def main(argv: Sequence[str] | None = None) -> int:
    """Run the selected benchmarks; the exit status is 1 when one raised."""
    tune_gc()  # what the ``casino-ledger`` process does before any command (workers too)
    wanted = list(sys.argv[1:] if argv is None else argv)
    names = discover()
    if wanted:
        names = [n for n in names if n in wanted or n.removeprefix("bench_") in wanted]
    failed = 0
    for name in names:
        print(f"== {name}", flush=True)
        started = time.perf_counter()
        try:
            importlib.import_module(f"bench.{name}").main()
        except Exception as exc:  # one broken benchmark must not hide the others
            failed += 1
            print(f"!! {name} failed: {exc!r}", flush=True)
        print(f"== {name} done in {time.perf_counter() - started:.1f} s\n", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
