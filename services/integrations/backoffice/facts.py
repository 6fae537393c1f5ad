"""Which records of the embedded log the read model may apply: the ledger facts (docs/trust.md, issue 28).

A record is a ledger fact only if a signed head of its expected writer covers it, verified with public
keys; the replay decides that in a first pass over the whole log
(:mod:`services.audit.replay.attested`). The back office asks the same question of a log that is still
growing, so :class:`Facts` keeps the replay's :class:`~services.audit.replay.attested.Survey` of every
record read so far and answers with :meth:`~services.audit.replay.attested.Attested.standing`, the same
pure decision:

* a **fact** is applied;
* a record that can **never** be one (outsider noise: its chain moved past it under signature, its
  writer sealed after it, the pipeline went idle after it, a processor refused it) is passed over and
  counted as unattested, with its first ids;
* a **pending** one (after its writer's last signed head, its writer not sealed since) stops the
  projector before it until a later head covers it or a seal leaves it out. The embedded pipeline seals
  every writer when it goes idle (a command of the API, ``ingest``, ``demo``), so the read model after
  a command shows its result.

Which public keys: :func:`writer_keys_for`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from services.audit.replay.attested import FIRST_IDS, Attested, Standing, Survey, WriterKey, writer_keys
from services.core import topics
from services.core.envelope import Envelope
from services.runtime.replay import chosen_public_keyring, writer_keys_from
from services.runtime.settings import setting

PAGE = 5000
"""Records surveyed per read of the log."""


def writer_keys_for(log: str | Path | None, keyring: str | Path | None = None) -> dict[str, WriterKey]:
    """The principals' public keys the read model checks signed heads with: ``CASINO_PUBLIC_KEYRING``;
    else the public half of the secret keyring the back office runs on (``serve --keyring``, else
    ``CASINO_KEYRING``) when it is the one the log is written with; else the public keyring beside the
    ``log`` (which ``demo`` writes), else the public demo keyring for a log it wrote (:func:`_found`);
    with a secret keyring that did not write the log (whose commands ``serve`` refuses), its public
    half too."""
    if setting("public_keyring").strip():
        return writer_keys_from(None)
    secret = keyring or setting("keyring") or ""
    if secret and Path(secret).is_file():
        from services.runtime.keyring import KeyringError, load_keyring  # noqa: PLC0415

        try:
            mine = writer_keys(load_keyring(secret).public_document())
        except KeyringError:
            mine = {}
        if mine and _signed_with(log, mine):
            return mine
        # a keyring the log was not written with (serve answers its commands 503): the log's own keys,
        # and this keyring's for what it wrote meanwhile
        return {**_found(log), **mine}
    return _found(log)


def kafka_writer_keys(keyring: str | Path | None = None) -> dict[str, WriterKey]:
    """The public keys the read model on Kafka checks signed heads with: ``CASINO_PUBLIC_KEYRING``, else
    the public half of ``keyring`` (or ``CASINO_KEYRING``), as :func:`writer_keys_for` chooses; the public
    demo keyring only in demo mode (anyone can sign with it); else none: nothing is applied."""
    if setting("public_keyring").strip() or keyring or setting("keyring"):
        return writer_keys_for(None, keyring)
    return writer_keys_for(None) if _demo_mode() else {}


def _found(log: str | Path | None) -> dict[str, WriterKey]:
    """The public keyring beside the log; else the public demo keyring, but only for a log the demo
    keys wrote (or in demo mode): anyone can sign with the demo key, so a production log never trusts
    it (nothing verifies there without its keys: the read model waits, it never applies a forgery)."""
    path = Path(log) if log is not None else None
    keys = writer_keys_from(None, log=path)
    if chosen_public_keyring(None, log=path) or _demo_mode():
        return keys
    return keys if log is None or _signed_with(log, keys, empty=False) else {}


def _demo_mode() -> bool:
    return bool(setting("demo_mode"))


def _signed_with(log: str | Path | None, keys: Mapping[str, WriterKey], *, empty: bool = True) -> bool:
    """Whether the first signed head in the log at ``log`` names one of ``keys`` (``empty`` when it has
    none yet)."""
    if log is None or not Path(log).is_file():
        return empty
    from services.core.envelope import parse_record  # noqa: PLC0415
    from services.runtime.embedded.store import EmbeddedLog  # noqa: PLC0415

    with EmbeddedLog(log, readonly=True) as opened:
        first = opened.read([topics.ATTEST], 0, 1)
    if not first:
        return empty
    try:
        auth = parse_record(first[0][-1]).auth or {}
    except ValueError:
        return False
    return auth.get("key_id") in keys


class Gate(Protocol):
    """What the projector asks of a source's records (:meth:`Projector.apply`): :class:`Facts` on the
    embedded log, :class:`services.integrations.backoffice.kafka_facts.PartitionGate` per partition on
    Kafka."""

    read: int
    """The last offset surveyed: a record after it is pending."""
    pending_at: int | None
    """Set by the projector: the offset it stopped at, waiting for a signed head."""

    def standing(self, env: Envelope, offset: int) -> Standing:
        """Where the record ``env`` at ``offset`` stands."""
        ...


class Facts:
    """The survey of an embedded log as far as it has been read (see the module docstring)."""

    def __init__(self, keys: Mapping[str, WriterKey]) -> None:
        self.survey = Survey(keys)
        self.read = 0
        """The last offset surveyed."""
        self._attested: Attested | None = None
        self.unattested = 0
        """Records the projector passed over as never attested (this process)."""
        self.first_ids: list[str] = []
        self.pending_at: int | None = None
        """The offset the projector stopped at, waiting for a signed head (``None``: it did not)."""

    def follow(self, log: Any) -> None:
        """Survey every record the log holds after the last one surveyed."""
        add = self.survey.add
        while rows := log.read_page(self.read, PAGE):
            for offset, _topic, _key, raw in rows:
                add(raw, offset)
            self.read = rows[-1][0]
            self._attested = None

    def standing(self, env: Envelope, offset: int) -> Standing:
        """Where the record ``env`` at ``offset`` stands; counted when it is never a fact."""
        if self._attested is None:
            self._attested = self.survey.finish()
        found = self._attested.standing(env.topic, env.key, env.seq, env.hash, env.event_id, offset)
        if found is Standing.NEVER:
            self.unattested += 1
            if len(self.first_ids) < FIRST_IDS:
                self.first_ids.append(env.event_id[:80])
        return found

    def summary(self) -> dict[str, Any]:
        """What the read model left out: ``unattested`` (count, first ids) and ``pending_at``."""
        return {
            "unattested": {"count": self.unattested, "first_ids": list(self.first_ids)},
            "pending_at": self.pending_at,
        }

    def __repr__(self) -> str:
        return f"Facts({json.dumps(self.summary())})"
