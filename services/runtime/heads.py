"""``casino-ledger heads (--db PATH | --kafka BOOTSTRAP) [--keys PUBLIC]``: the current signed tree head.

Audit signs, in each checkpoint, an RFC 6962 Merkle root over the head of every chain it has verified
(:func:`services.audit.processor.tree_head`). This command prints the latest of them (the highest ``n``)
as one JSON document, to publish or send to the regulator each day::

    {"format": "casino-ledger/tree-head-1",
     "tree_head": {"n", "size", "root"},
     "checkpoint": {"event_id", "topic", "key", "seq", "hash", "occurred_at"},
     "key_id", "algorithm", "signature", "fingerprint", "verified",
     "signed": {...the checkpoint's payload: what the signature covers...}}

``fingerprint`` is ``sha256:`` and the SHA-256 of the signing key's raw public key, from the public
keyring (``--keys``, else ``CASINO_PUBLIC_KEYRING``, else the one beside ``--db``); ``null`` when no key
of that id is known there. ``verified`` says whether the signature verifies under it. A tree head whose
signature fails under a known key is refused (exit 1). A regulator keeps the file and later runs
``replay --expect FILE``: a log that does not extend it (truncated, rolled back, forked) is a finding.
No source, no tree head: one line, exit 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from services.core import topics
from services.core.envelope import Envelope
from services.core.signing import fingerprint, verify
from services.runtime.replay import SourceError, open_readonly, public_keys_from

HEADS_FORMAT = "casino-ledger/tree-head-1"
"""The ``format`` of a ``heads`` document (what ``replay --expect`` reads)."""


def _db_findings(path: Path) -> Iterable[bytes]:
    if not path.exists():
        raise SourceError(f"no log at {path}")
    conn = open_readonly(path)
    try:
        rows = conn.execute(
            'SELECT body FROM records WHERE topic = ? ORDER BY "offset"', (topics.AUDIT_FINDINGS,)
        )
        for (body,) in rows:
            yield bytes(body)
    finally:
        conn.close()


def _kafka_findings(bootstrap: str) -> Iterable[bytes]:
    from services.runtime.kafka import topic_io  # noqa: PLC0415

    return (r.value or b"" for r in topic_io.iter_raw(bootstrap, [topics.AUDIT_FINDINGS]))


def latest_tree_head(raws: Iterable[bytes]) -> Envelope | None:
    """The checkpoint with the highest tree head ``n`` among ``raws`` (undecodable records skipped)."""
    best: tuple[int, Envelope] | None = None
    for raw in raws:
        if b"AuditCheckpoint" not in raw:
            continue
        try:
            env = Envelope.model_validate_json(raw)
        except (ValueError, ValidationError):
            continue
        tree = env.payload.get("tree") if env.type == "AuditCheckpoint" else None
        n = tree.get("n") if isinstance(tree, Mapping) else None
        if type(n) is int and (best is None or n > best[0]):
            best = (n, env)
    return None if best is None else best[1]


def heads_document(env: Envelope, keys: Mapping[str, str]) -> dict[str, Any]:
    """The ``heads`` document of a checkpoint (see the module docstring)."""
    p = env.payload
    tree = p["tree"]
    public = keys.get(str(p.get("key_id")))
    return {
        "format": HEADS_FORMAT,
        "tree_head": {"n": tree.get("n"), "size": tree.get("size"), "root": tree.get("root")},
        "checkpoint": {
            "event_id": env.event_id,
            "topic": env.topic,
            "key": env.key,
            "seq": env.seq,
            "hash": env.hash,
            "occurred_at": env.occurred_at,
        },
        "key_id": p.get("key_id"),
        "algorithm": p.get("algorithm"),
        "signature": p.get("signature"),
        "fingerprint": None if public is None else fingerprint(public),
        "verified": public is not None and verify(p, keys) is None,
        "signed": dict(p),
    }


def read_heads(path: Path, keys: Mapping[str, str]) -> dict[str, Any]:
    """What ``replay --expect`` pins: the tree head of a ``heads`` document, its signature verified
    under ``keys`` (``SourceError`` when the file is not one or does not verify)."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SourceError(f"cannot read the pinned heads {path}: {exc.strerror}") from None
    except ValueError:
        raise SourceError(f"the pinned heads {path} are not JSON") from None
    if (
        not isinstance(doc, dict)
        or doc.get("format") != HEADS_FORMAT
        or not isinstance(doc.get("signed"), dict)
    ):
        raise SourceError(f"{path} is not a tree head written by casino-ledger heads")
    signed, checkpoint = doc["signed"], doc.get("checkpoint") or {}
    why = verify(signed, keys)
    if why is not None:
        raise SourceError(f"the pinned tree head in {path} does not verify under the keyring ({why})")
    return {"event_id": str(checkpoint.get("event_id")), "table_id": str(signed.get("table_id")),
            "tree": signed.get("tree")}  # fmt: skip


def heads_main(args: argparse.Namespace) -> int:
    """Print the latest signed tree head; exit 0, 1 when it does not verify, 2 for a bad source."""
    try:
        db = Path(args.db) if args.db else None
        raws = _db_findings(db) if db is not None else _kafka_findings(args.kafka)
        env = latest_tree_head(raws)
        what = str(db) if db is not None else f"the topics at {args.kafka}"
        if env is None:
            raise SourceError(f"{what} holds no signed tree head (no audit checkpoint with a tree)")
        keys, _ = public_keys_from(getattr(args, "keys", None), log=db)
    except SourceError as exc:
        print(f"casino-ledger: error: {exc}", file=sys.stderr)
        return 2
    doc = heads_document(env, keys)
    if doc["fingerprint"] is not None and not doc["verified"]:
        print(f"casino-ledger: error: tree head {doc['tree_head']['n']} does not verify under key id "
              f"{doc['key_id']}: not audit's signature", file=sys.stderr)  # fmt: skip
        return 1
    print(json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False))
    return 0
