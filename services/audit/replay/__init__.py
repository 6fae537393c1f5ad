"""The regulatory replay's pure half: audit re-run over a recorded log, with no I/O.

:func:`replay_records` streams records (bytes as the log holds them, or envelopes) through a
:class:`Replayer`, which decodes each, drops exact re-deliveries, checks its hash and chain, runs the
audit processor on it and notes what the report needs; checkpoints are verified against a public keyring
handed in. The shell (:mod:`services.runtime.replay`) reads the sources (JSONL, a read-only SQLite log,
Kafka), finds the keyring and the cadence in the environment, and renders the reports; its module
docstring says what a replay checks and what each verdict means.

Modules: :mod:`~services.audit.replay.replayer` (decode and the replay), :mod:`~.scope`,
:mod:`~.report` (the report and root causes), :mod:`~.summaries` (per table and shoe),
:mod:`~.checkpoints`, :mod:`~.collector` (one game round in full, ``--coup``).
"""

from services.audit.replay.checkpoints import Checkpoints
from services.audit.replay.collector import CoupCollector
from services.audit.replay.replayer import (
    DEDUP_WINDOW,
    MAX_ALERTS_LISTED,
    MAX_REFUSED_LISTED,
    REFUSED_REASONS,
    Replayer,
    decode,
    replay_audit,
    replay_records,
)
from services.audit.replay.report import MAX_FINDINGS_LISTED, Report, entry, group_findings, stable
from services.audit.replay.scope import Scope, iso_instant
from services.audit.replay.summaries import Summaries

__all__ = [
    "DEDUP_WINDOW",
    "MAX_ALERTS_LISTED",
    "MAX_FINDINGS_LISTED",
    "MAX_REFUSED_LISTED",
    "REFUSED_REASONS",
    "Checkpoints",
    "CoupCollector",
    "Replayer",
    "Report",
    "Scope",
    "Summaries",
    "decode",
    "entry",
    "group_findings",
    "iso_instant",
    "replay_audit",
    "replay_records",
    "stable",
]
