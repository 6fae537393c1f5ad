"""What audit's tree heads cost (issue #28), each beside the same work without them, in the same run.

The log: the seeded demo session exported to JSONL (:func:`bench.bench_replay.build_log`, cached under
``var/bench/``; ``BENCH_TREE_EVENTS`` records, default 100,000). Two measures, each alternating with and
without for ``BENCH_TREE_ROUNDS`` rounds (default 5), CPU time (``time.process_time``: a shared
machine's wall time moves too much), medians compared:

* **audit**: the audit processor stepping through every record it reads, its checkpoints with a tree
  head (``Audit(tree=True)``, production) and without (``tree=False``);
* **replay**: the whole replay of the log, with the tree heads checked against it and with that check
  switched off (:class:`services.audit.replay.tree_head.TreeHeads` ``on_record``/``on_tree`` made no-ops).

Run: ``.venv/bin/python -m bench tree``.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from typing import Any

from bench.bench_replay import build_log
from services.audit.processor import Audit
from services.audit.replay import tree_head
from services.core.envelope import Envelope
from services.core.processor import initial_state, step
from services.runtime.logging import configure
from services.runtime.replay import read_jsonl, replay

EVENTS = int(os.environ.get("BENCH_TREE_EVENTS", "100000"))
ROUNDS = max(1, int(os.environ.get("BENCH_TREE_ROUNDS", "5")))


def _cpu(work: Callable[[], Any]) -> float:
    start = time.process_time()
    work()
    return time.process_time() - start


def _audit(inputs: list[Envelope], *, tree: bool) -> Callable[[], Any]:
    def run() -> int:
        audit = Audit(tree=tree)
        state = initial_state(audit)
        return sum(len(step(audit, state, e)) for e in inputs)

    return run


def _replay(raws: list[bytes], *, checked: bool) -> Callable[[], Any]:
    cls = tree_head.TreeHeads
    on_record, on_tree = cls.on_record, cls.on_tree

    def run() -> Any:
        if not checked:
            cls.on_record = lambda self, n, env: None  # type: ignore[method-assign]
            cls.on_tree = lambda self, *a, **k: None  # type: ignore[method-assign]
        try:
            return replay(raws)
        finally:
            cls.on_record, cls.on_tree = on_record, on_tree  # type: ignore[method-assign]

    return run


def _compare(name: str, without: Callable[[], Any], with_: Callable[[], Any]) -> None:
    a: list[float] = []
    b: list[float] = []
    for _ in range(ROUNDS):
        a.append(_cpu(without))
        b.append(_cpu(with_))
    ma, mb = statistics.median(a), statistics.median(b)
    print(
        f"  {name:<7} without {ma:6.2f} CPU s, with tree heads {mb:6.2f} CPU s, ratio {mb / ma:.3f} "
        f"(medians of {ROUNDS}; rounds {', '.join(f'{x:.2f}/{y:.2f}' for x, y in zip(a, b, strict=True))})"
    )


def main() -> None:
    """Print both comparisons."""
    configure("ERROR")
    path = build_log(EVENTS)
    raws = list(read_jsonl(path))
    inputs = [Envelope.model_validate_json(r) for r in raws]
    inputs = [e for e in inputs if e.topic in Audit.inputs]
    print(f"bench_tree: {len(raws):,} records ({path}), {len(inputs):,} read by audit, {ROUNDS} rounds")
    _compare("audit", _audit(inputs, tree=False), _audit(inputs, tree=True))
    _compare("replay", _replay(raws, checked=False), _replay(raws, checked=True))


if __name__ == "__main__":
    main()
