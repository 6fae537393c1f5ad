"""The composition root: every processor and its wiring, built in one place from Settings and a Keyring.

The embedded runner (:func:`demo_pipeline` in demo and test mode), the Kafka workers
(:mod:`services.cli.worker`), ``demo``, ``replay``, ``ingest`` and the tests all get
their processors here, so that a key, a policy or a cadence is configured once:

* each processor carries the :class:`~services.core.trust.Guard` of its principal (every key to verify
  its inputs with, its own to sign its outputs): :func:`services.core.processor.step` enforces it;
* the dealer derives every RNG shoe's seed from its own secret in the keyring, and honours an
  inbox-chosen ``seed_hex`` only in demo/test mode (:attr:`Composition.demo_mode`);
* audit signs its checkpoints with the Ed25519 key derived from the audit principal's secret
  (:func:`services.core.signing.signing_key_from_secret`; ``keys public`` gives its public half), every
  ``CASINO_AUDIT_CHECKPOINT_EVERY`` coups (default 50).

:meth:`Composition.from_settings` is the production path: the keyring file named by
``CASINO_KEYRING``, refused when it holds the public demo keys unless ``CASINO_DEMO_MODE`` is set;
with no keyring configured only demo mode runs, on the public demo keyring. :meth:`Composition.demo`
is the demo and test path.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from services.core.limits import AMOUNT_MAX_MINOR
from services.core.signing import SigningKey
from services.core.trust import Guard, Principal
from services.runtime.keyring import Keyring, KeyringError, demo_keyring, load_keyring, require_private
from services.runtime.settings import SeamlessConfig, Settings, checkpoint_every

if TYPE_CHECKING:
    from services.audit.processor import Audit
    from services.audit.replay.attested import WriterKey
    from services.core.processor import Processor
    from services.dealer.processor import Dealer
    from services.monitor.accounts import AccountMonitor
    from services.monitor.cage import CageMonitor
    from services.monitor.casework import Casework
    from services.monitor.processor import Monitor
    from services.settlement.payout_stage import PayoutStage


@dataclass(frozen=True, slots=True)
class Composition:
    """Everything the processors are built from: the keyring and the mode."""

    keyring: Keyring
    demo_mode: bool = False
    amount_max_minor: int = AMOUNT_MAX_MINOR
    """The largest stake, deposit or withdrawal the dealer and the wallet stage accept."""
    seamless: SeamlessConfig | None = None
    """The operator's wallet (``CASINO_SEAMLESS_*``): when set, settlement's wallet stage is the
    seamless adapter (:mod:`services.settlement.seamless_stage`) for its currencies."""

    @classmethod
    def from_settings(cls, settings: Settings | None = None) -> Composition:
        """The keyring of ``CASINO_KEYRING`` (or, in demo mode only, the public demo keyring).

        Raises :class:`~services.runtime.keyring.KeyringError` (a one-line message, no secret) when no
        usable keyring is configured: shells print it and exit 2.
        """
        s = settings if settings is not None else Settings()
        if s.keyring is not None:
            where = f"keyring {s.keyring}"
            ring = require_private(load_keyring(s.keyring), demo_mode=s.demo_mode, where=where)
            return cls(ring, s.demo_mode, s.amount_max_minor, seamless_config(s))
        if s.demo_mode:
            return cls(demo_keyring(), True, s.amount_max_minor, seamless_config(s))
        raise KeyringError("no keyring: set CASINO_KEYRING to a file made by `casino-ledger keys new`")

    @classmethod
    def demo(cls, keyring: Keyring | None = None) -> Composition:
        """Demo and test mode: ``keyring`` (default: the public demo keyring), inbox seeds allowed."""
        return cls(keyring if keyring is not None else demo_keyring(), demo_mode=True)

    def _guarded(self, processor: Processor[Any]) -> Processor[Any]:
        principal = Principal(processor.name)
        self.keyring.signing_key(principal)  # a service signs its heads: its key file must hold its seed
        processor.guard = self.keyring.guard(principal)
        return processor

    def dealer(self) -> Dealer:
        """The dealer: shoe seeds from its secret; ``seed_hex`` only in demo mode."""
        from services.dealer.processor import Dealer  # noqa: PLC0415 (a worker imports only its service)

        made = Dealer(
            self.keyring.key(Principal.DEALER).secret,
            amount_max_minor=self.amount_max_minor,
            allow_seed_hex=self.demo_mode,
        )
        self._guarded(made)
        return made

    def payout_stage(self) -> PayoutStage:
        """Settlement's payout stage."""
        from services.settlement.payout_stage import PayoutStage  # noqa: PLC0415

        made = PayoutStage()
        self._guarded(made)
        return made

    def wallet_stage(self) -> Processor[Any]:
        """Settlement's wallet stage: the internal one, or the seamless adapter when configured."""
        from services.settlement.wallet_stage import WalletStage  # noqa: PLC0415

        internal = WalletStage(amount_max_minor=self.amount_max_minor)
        made: Processor[Any] = internal
        if self.seamless is not None:
            from services.settlement.seamless_stage import SeamlessWalletStage  # noqa: PLC0415

            s = self.seamless
            made = SeamlessWalletStage(internal, currencies=s.currencies, policy=s.policy)
        self._guarded(made)
        return made

    def settlement_guard(self) -> Guard:
        """The settlement principal's guard: what the seamless HTTP shell signs its answers with."""
        return self.keyring.guard(Principal.SETTLEMENT)

    def audit(self) -> Audit:
        """Audit, signing its checkpoints with the keyring's audit key, at the configured cadence."""
        from services.audit.processor import Audit  # noqa: PLC0415

        made = Audit(signing=self.checkpoint_key(), checkpoint_every=checkpoint_every())
        self._guarded(made)
        return made

    def audit_stages(self) -> list[Processor[Any]]:
        """Audit per partition on Kafka: its account and table stages (:mod:`services.audit.partitioned`),
        at the configured cadence; they sign nothing (the tree stage writes and signs their records)."""
        from services.audit.partitioned import AuditAccounts, AuditTables  # noqa: PLC0415

        every = checkpoint_every()
        made: list[Processor[Any]] = [AuditAccounts(every), AuditTables(every)]
        for stage in made:
            self._guarded(stage)
        return made

    def audit_tree(self) -> Processor[Any]:
        """Audit's tree stage on Kafka: writes the stages' findings and checkpoints, each checkpoint with
        the tree head over every partition's chain heads, signed with the keyring's audit key."""
        from services.audit.partitioned import AuditTree  # noqa: PLC0415

        made = AuditTree(signing=self.checkpoint_key())
        self._guarded(made)
        return made

    def checkpoint_key(self) -> SigningKey:
        """The Ed25519 key audit signs checkpoints with: derived from the audit principal's secret."""
        return self.keyring.checkpoint_key()

    def checkpoint_public_keys(self) -> dict[str, str]:
        """Key id → public key hex of :meth:`checkpoint_key`: what a replay of this pipeline's log
        verifies its checkpoints with (what ``keys public`` writes for a regulator)."""
        key = self.checkpoint_key()
        return {key.key_id: key.public_hex()}

    def writer_public_keys(self) -> dict[str, WriterKey]:
        """Key id → public key of every principal's signed heads: what a replay of this pipeline's log
        verifies its attestations with (the ``principals`` of ``keys public``)."""
        from services.audit.replay.attested import writer_keys  # noqa: PLC0415

        return writer_keys(self.keyring.public_document())

    def monitor(self) -> Monitor:
        """The monitor."""
        from services.monitor.processor import Monitor  # noqa: PLC0415

        made = Monitor()
        self._guarded(made)
        return made

    def account_monitor(self) -> AccountMonitor:
        """The monitor's per-account stage (players followed across tables, on the wallet events)."""
        from services.monitor.accounts import AccountMonitor  # noqa: PLC0415

        made = AccountMonitor()
        self._guarded(made)
        return made

    def cage_monitor(self) -> CageMonitor:
        """The monitor's cage stage (deposits across accounts, in the cage's one order)."""
        from services.monitor.cage import CageMonitor  # noqa: PLC0415

        made = CageMonitor()
        self._guarded(made)
        return made

    def casework(self) -> Casework:
        """The monitor's casework stage (an analyst's steps on alerts' cases, made facts)."""
        from services.monitor.casework import Casework  # noqa: PLC0415

        made = Casework()
        self._guarded(made)
        return made

    def service(self, name: str) -> list[Processor[Any]]:
        """The processors of one service (one Kafka worker): ``dealer``, ``settlement``, ``audit``,
        ``monitor`` or ``audit-tree``. ``KeyError`` for another name."""
        if name == "settlement":
            return [self.payout_stage(), self.wallet_stage()]
        if name == "monitor":
            return [self.monitor(), self.account_monitor(), self.cage_monitor(), self.casework()]
        if name == "audit":
            return self.audit_stages()
        if name == "audit-tree":
            return [self.audit_tree()]
        builders: dict[str, Callable[[], Processor[Any]]] = {
            "dealer": self.dealer, "monitor": self.monitor,
        }  # fmt: skip
        return [builders[name]()]

    def pipeline(self) -> list[tuple[str, Processor[Any]]]:
        """Every processor with its consumer name, in the order the embedded bus steps them."""
        return [
            ("dealer", self.dealer()),
            ("settlement.payout", self.payout_stage()),
            ("settlement.wallet", self.wallet_stage()),
            ("audit", self.audit()),
            ("monitor", self.monitor()),
            ("monitor.accounts", self.account_monitor()),
            ("monitor.cage", self.cage_monitor()),
            ("monitor.casework", self.casework()),
        ]

    def processors(self) -> Sequence[Processor[Any]]:
        """Every processor, in pipeline order."""
        return [p for _, p in self.pipeline()]


def seamless_config(s: Settings) -> SeamlessConfig | None:
    """The seamless wallet's configuration from ``CASINO_SEAMLESS_*`` (``None`` when no URL is set)."""
    if not s.seamless_url:
        return None
    from services.core.seamless import RetryPolicy  # noqa: PLC0415

    policy = RetryPolicy(s.seamless_backoff_base_ms, s.seamless_backoff_max_ms, s.seamless_debit_window_ms)
    return SeamlessConfig(
        url=s.seamless_url, secret=s.seamless_secret, currencies=s.seamless_currency_set,
        timeout_s=s.seamless_timeout_s, policy=policy, concurrency=s.seamless_concurrency,
        verify=s.seamless_tls_verify, ca_file=s.seamless_ca_file, client_cert=s.seamless_client_cert,
        client_key=s.seamless_client_key,
    )  # fmt: skip


def demo_pipeline(keyring: Keyring | None = None) -> list[tuple[str, Processor[Any]]]:
    """Demo and test mode's processors (:meth:`Composition.demo`), said as such at every call."""
    return Composition.demo(keyring).pipeline()


def keyring_pipeline(keyring_path: str | Path | None) -> list[tuple[str, Processor[Any]]]:
    """The processors on the keyring at ``keyring_path`` (the back office's gateway runs them with the
    keyring its API signs with); with none, demo mode's (:func:`demo_pipeline`)."""
    if keyring_path is None:
        return demo_pipeline()
    settings = Settings().model_copy(update={"keyring": Path(keyring_path)})
    return Composition.from_settings(settings).pipeline()
