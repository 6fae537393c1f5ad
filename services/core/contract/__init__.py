"""The event contract as code (docs/event-contract.md): one typed, frozen pydantic payload per event type.

The :class:`~services.core.envelope.Envelope` carries the payload as a plain dict so that its hash is
taken over canonical JSON; the models here say what that dict must hold. Every model is named exactly
like the event ``type`` it describes, and :data:`PAYLOADS` maps the one to the other.

What holds, and why:

* **Frozen, exact.** Models are immutable. What we produce is validated with ``extra="forbid"``: a
  misspelt or unplanned field is a bug, caught where the event is written.
* **Tolerant reading.** A reader may meet payloads written by a *newer* producer that added optional
  fields (the only change allowed without a version bump, see ``schemas/README.md``). Read those with
  ``payload_of(envelope, tolerant=True)``: the same models, validated with ``extra="ignore"`` at every
  level (pydantic's per-call ``extra`` override), so unknown fields are dropped, never guessed at.
  Types are checked just as strictly in both modes.
* **No floats, ever.** Every integer field is a strict ``int`` (a float such as ``5.0``, a bool or a
  numeric string is refused), money is in minor units (``*_minor``) next to a 3-letter currency code,
  and free-form JSON (:data:`Json`) excludes floats too — so RFC 8785 canonical JSON is plain
  ``json.dumps(sort_keys=True)`` and the hash of a payload is stable across languages.
* **Balanced transfers.** A ``postings`` list is never empty and sums to zero (double entry).
* **Versioned.** Each type has a current ``schema_version`` (:data:`SCHEMA_VERSIONS`). A breaking
  change bumps it and registers an upcaster next to the model (:data:`UPCASTERS`, keyed by
  ``(type, from_version)``); :func:`payload_of` upcasts old records step by step, so a replay of a
  years-old log reads every record through today's model.
* **Stable reason codes.** Business refusals are :class:`RefusalReason`, audit findings
  :class:`FindingReason`, both listed in precedence order; dead letters and operator-command refusals
  use :class:`services.core.errors.Reason`. Every refusal code is also a ``Reason`` (one vocabulary).

:func:`dump_payload` is the one way to turn a model into the dict an envelope carries
(``model_dump(mode="json")``, nothing excluded), and :func:`to_draft` puts it on the right topic
(:data:`TOPIC_OF_TYPE`).
"""

from __future__ import annotations

from services.core import reasons
from services.core.contract import attest, base, casework, findings, registry, table, wallet
from services.core.contract.attest import *  # noqa: F403
from services.core.contract.base import *  # noqa: F403
from services.core.contract.casework import *  # noqa: F403
from services.core.contract.findings import *  # noqa: F403
from services.core.contract.registry import *  # noqa: F403
from services.core.contract.table import *  # noqa: F403
from services.core.contract.wallet import *  # noqa: F403
from services.core.reasons import *  # noqa: F403

__all__: list[str] = []
__all__ += reasons.__all__
__all__ += base.__all__
__all__ += casework.__all__
__all__ += wallet.__all__
__all__ += table.__all__
__all__ += findings.__all__
__all__ += attest.__all__
__all__ += registry.__all__
