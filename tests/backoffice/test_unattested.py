"""Issue 28: an outsider with write access to the log file and no secret appends forged money — a
1,000,000.00 deposit for a new account, deposits, withdrawals and payouts on real players' wallet chains
(seq and ``prev_hash`` continued, hashes recomputed), payout requests — and the back office's read model,
``statement`` and the API show exactly what they showed without them: only records a signed head of
their writer covers move money. A command run after the forgeries still shows its result.

The forger is modelled from the file format alone (canonical JSON, SHA-256 over the envelope without
``hash`` and ``auth``): nothing here calls the code under test to forge.
"""

from __future__ import annotations

import copy
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, select

from services.audit.replay.attested import writer_keys
from services.cli import main
from services.core import topics
from services.core.envelope import request
from services.core.trust import Principal, authenticate
from services.integrations.backoffice import queries
from services.integrations.backoffice import schema as s
from services.integrations.backoffice.migrate import upgrade
from services.integrations.backoffice.projector import INPUTS, Projector
from services.integrations.backoffice.schema import make_engine
from services.runtime.compose import Composition
from services.runtime.embedded.bus import EmbeddedBus
from services.runtime.embedded.store import EmbeddedLog
from services.runtime.keyring import Keyring, load_keyring
from services.runtime.replay import read_db, replay
from tests.backoffice.conftest import make_keyring, play, running_server
from tests.backoffice.test_api import copy_log
from tests.integration.test_tamper_hypothesis import content_hash

Rec = dict[str, Any]
Authentic = tuple[Path, Path, dict[str, str]]
MILLION = 100_000_000
"""1,000,000.00 in minor units."""


@pytest.fixture(scope="module")
def authentic(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, str]]:
    """An authentic log made by the real pipeline on a keyring of its own: (log, keyring, API key per
    role)."""
    tmp = tmp_path_factory.mktemp("unattested")
    ring = tmp / "keyring.json"
    keys = make_keyring(ring)
    return play(tmp / "log.db", tables=2, coups=6, seed=5, keyring=ring), ring, keys


# --- the forger: the file format, nothing else -------------------------------------------------


def records(path: Path) -> list[Rec]:
    with EmbeddedLog(path, readonly=True) as log:
        return [json.loads(raw) for _o, _t, _k, raw in log.iter_all()]


def template(recs: list[Rec], type_: str) -> Rec:
    return copy.deepcopy(next(r for r in recs if r["type"] == type_))


def forge(recs: list[Rec], kind: str, account: str, amount: int, n: int, auth: str) -> Rec:
    """A forged wallet record of ``kind`` for ``account``, chained onto that account's wallet chain as
    the file holds it (a request is unchained)."""
    if kind == "payout_request":
        rec = template(recs, "PayoutIssued")
        house = next(p["account"] for p in rec["payload"]["postings"] if p["account"].endswith(":house"))
        postings = [{"account": house, "amount_minor": -amount}, {"account": account, "amount_minor": amount}]
        bet = f"forged-bet-{n}"
        rec["payload"].update(
            credit_minor=amount, win_minor=amount, bet_id=bet, payout_id=f"payout/{bet}", postings=postings
        )
    else:
        rec = template(recs, "PayoutApplied" if kind == "payout" else "FundsDeposited")
        sign = -1 if kind == "withdrawal" else 1
        other = "table:T01-punto-banco:house" if kind == "payout" else "cage:EUR"
        rec["type"] = {"deposit": "FundsDeposited", "withdrawal": "FundsWithdrawn"}.get(kind, rec["type"])
        rec["payload"]["postings"] = [
            {"account": other, "amount_minor": -sign * amount},
            {"account": account, "amount_minor": sign * amount},
        ]
        chain = [r for r in recs if r["topic"] == topics.WALLET_EVENTS and r["key"] == account]
        before = next((r["payload"]["balance_after_minor"] for r in reversed(chain)
                       if "balance_after_minor" in r["payload"]), 0)  # fmt: skip
        rec["payload"].update(
            amount_minor=amount, transfer_id=f"cashier/forged-{n}", balance_before_minor=before,
            balance_after_minor=before + sign * amount,
        )  # fmt: skip
        if kind == "payout":
            rec["payload"].update(transfer_id=f"payout/forged-bet-{n}", bet_id=f"forged-bet-{n}",
                                  payout_id=f"payout/forged-bet-{n}")  # fmt: skip
        rec["seq"] = chain[-1]["seq"] + 1 if chain else 0
        rec["prev_hash"] = chain[-1]["hash"] if chain else None
    rec["key"] = rec["payload"]["account_id"] = account
    rec["event_id"] = f"00000000-0000-4000-8000-{n:012d}"
    rec["hash"] = content_hash(rec)
    if auth == "none":
        rec.pop("auth", None)
    elif auth == "mallory":
        rec["auth"] = {"key_id": rec["auth"]["key_id"], "mac": "ab" * 32}
    return rec


def append(path: Path, forged: list[Rec], *, internal: bool) -> None:
    """The forged records appended to the log file with SQLite alone."""
    with sqlite3.connect(path) as db:
        for rec in forged:
            body = json.dumps(rec, sort_keys=True, separators=(",", ":")).encode()
            db.execute(
                "INSERT INTO records (topic, key, event_id, type, body, internal) VALUES (?, ?, ?, ?, ?, ?)",
                (rec["topic"], rec["key"], rec["event_id"], rec["type"], body, int(internal)),
            )
    db.close()


# --- what the back office and the replay say ---------------------------------------------------


def project(path: Path, ring: Keyring, tmp: Path, name: str, *, gated: bool = True) -> Engine:
    engine = make_engine(f"sqlite:///{tmp / f'{name}.db'}")
    upgrade(engine)
    projector = Projector(engine, writers=writer_keys(ring.public_document()))
    with EmbeddedLog(path, readonly=True) as log:
        if gated:
            projector.catch_up(log)
        else:  # what the projector did before issue 28's read model: every record
            projector.apply(log.read(INPUTS, 0, 100_000))
    return engine


def view(engine: Engine) -> dict[str, list[tuple[Any, ...]]]:
    """Every projected row but the log offsets (which forged records ahead of a command shift)."""
    out = {}
    with engine.connect() as conn:
        for table in s.PROJECTED:
            cols = [c for c in table.c if "offset" not in c.name and table.name != "bo_positions"]
            rows = [tuple(r) for r in conn.execute(select(*cols))] if cols else []
            out[table.name] = sorted(rows, key=lambda r: json.dumps(r, default=str))
    engine.dispose()
    return out


def verdict(path: Path, ring: Keyring) -> tuple[str, list[str]]:
    """The replay's verdict with the genuine public keys, and the reasons of its findings."""
    public = ring.public_document()
    report = replay(list(read_db(path)), keys=public["ed25519"], writers=writer_keys(public), ordered=True)
    found = report.to_dict().get("findings", [])
    return report.verdict, sorted(f"{f.get('reason')}: {f.get('detail', '')[:160]}" for f in found)


def deposit(path: Path, ring: Keyring, account: str, amount: int) -> None:
    """A genuine cashier deposit run through the real pipeline until idle (sealed)."""
    env = request(
        "Deposit", topics.WALLET_REQUESTS, account,
        {"account_id": account, "amount_minor": amount, "currency": "EUR"},
        event_id="11111111-1111-4111-8111-111111111111", occurred_at="2026-11-23T09:00:00.000Z",
        producer="cashier",
    )  # fmt: skip
    bus = EmbeddedBus(path, Composition.demo(ring).pipeline())
    try:
        bus.publish([authenticate(env, ring.key(Principal.CASHIER))])
        bus.drain()
    finally:
        bus.close()


PLAYERS = ["player:001", "player:002", "player:003", "player:999"]
forgeries = st.lists(
    st.tuples(
        st.sampled_from(["deposit", "withdrawal", "payout", "payout_request"]),
        st.sampled_from(PLAYERS),
        st.sampled_from([1, 5_000, MILLION, 10**11]),
        st.sampled_from(["template", "none", "mallory"]),
    ),
    min_size=1,
    max_size=4,
)


@settings(
    max_examples=8,
    deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(drawn=forgeries, internal=st.booleans(), then=st.sampled_from([None, "player:001", "player:002"]))
def test_forged_money_appended_to_the_file_moves_nothing(
    authentic: Authentic, tmp_path_factory: pytest.TempPathFactory, drawn: list[Any], internal: bool,
    then: str | None,
) -> None:  # fmt: skip
    """Forged deposits, withdrawals, payouts and payout requests appended to the log file (chained, no
    secret) leave every row of the read model and the replay's verdict and balances as they are without
    them; a genuine deposit run after them (sealed) shows in both alike. The one difference: a pipeline
    run after them refuses them, and the monitor's ``refused_record`` alerts say so."""
    log, ring_path, _ = authentic
    ring = load_keyring(ring_path)
    tmp = tmp_path_factory.mktemp("forged")
    clean, tampered = copy_log(log, tmp / "clean.db"), copy_log(log, tmp / "tampered.db")
    recs = records(tampered)
    forged = []
    for n, (kind, account, amount, auth) in enumerate(drawn):
        forged.append(forge([*recs, *forged], kind, account, amount, n, auth))
    append(tampered, forged, internal=internal)
    if then is not None:
        for path in (clean, tampered):
            deposit(path, ring, then, 7_700)
    got, want = view(project(tampered, ring, tmp, "t")), view(project(clean, ring, tmp, "c"))
    raised = set(got.pop("bo_alerts")) - set(want.pop("bo_alerts"))
    assert got == want
    assert {row[4] for row in raised} <= {"refused_record"}  # the monitor saw them refused: rightly
    assert not raised or then is not None  # (only a pipeline run after them reads them)
    v_t, v_c = verdict(tampered, ring), verdict(clean, ring)
    assert v_t == v_c, (v_t, drawn, internal, then)


def test_the_forgeries_would_count_without_the_signed_heads(authentic: Authentic, tmp_path: Path) -> None:
    """The forger's records are well-formed: a projector applying every record (as before issue 28)
    shows the forged 1,000,000.00 and the forged payout's bet; the read model of facts shows neither.
    The payout request names a real fact as its cause: appended after the pipeline last ran, nothing
    refused it, and still it is no fact."""
    log, ring_path, _ = authentic
    ring = load_keyring(ring_path)
    tampered = copy_log(log, tmp_path / "tampered.db")
    recs = records(tampered)
    deposit = forge(recs, "deposit", "player:999", MILLION, 0, "template")
    payout = forge(recs, "payout_request", "player:001", MILLION, 1, "template")
    append(tampered, [deposit, payout], internal=False)
    with project(tampered, ring, tmp_path, "all", gated=False).connect() as c:
        assert queries.balance(c, "player:999")["balance_minor"] == MILLION
        assert (
            c.execute(select(s.bets.c.win_minor).where(s.bets.c.bet_id == "forged-bet-1")).scalar() == MILLION
        )
    with project(tampered, ring, tmp_path, "facts").connect() as c:
        assert not queries.account_exists(c, "player:999")
        assert c.execute(select(s.bets.c.bet_id).where(s.bets.c.bet_id == "forged-bet-1")).first() is None
    assert verdict(tampered, ring) == verdict(log, ring)


@pytest.fixture
def forged_log(authentic: Authentic, tmp_path: Path) -> Iterator[tuple[Path, Path, dict[str, str]]]:
    """A copy of the authentic log with forged 1,000,000.00 deposits appended (player:001's chain and a
    new account), its keyring with a fresh API key per role: (log, keyring, keys)."""
    log, ring, keys = authentic
    tampered = copy_log(log, tmp_path / "log.db")
    recs = records(tampered)
    first = forge(recs, "deposit", "player:001", MILLION, 0, "template")
    append(
        tampered, [first, forge([*recs, first], "deposit", "player:999", MILLION, 1, "none")], internal=False
    )
    yield tampered, ring, keys


def test_statement_leaves_forged_deposits_out(
    authentic: Authentic, forged_log: tuple[Path, Path, dict[str, str]], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """``statement`` over the forged log prints player:001's genuine lines only, and knows no
    player:999; ``project`` names the forgeries as unattested."""
    tampered, ring, _ = forged_log
    monkeypatch.setenv("CASINO_KEYRING", str(ring))
    clean = copy_log(authentic[0], tmp_path / "clean.db")
    assert main(["statement", "--db", str(clean), "--account", "player:001", "--format", "json"]) == 0
    expected = capsys.readouterr().out
    assert main(["statement", "--db", str(tampered), "--account", "player:001", "--format", "json"]) == 0
    assert capsys.readouterr().out == expected
    assert main(["statement", "--db", str(tampered), "--account", "player:999"]) == 2
    assert "player:999" in capsys.readouterr().err
    deposit(tampered, load_keyring(ring), "player:002", 100)  # sealed after the forgeries: never facts
    assert main(["project", "--db", str(tampered)]) == 0
    err = capsys.readouterr().err
    assert "left out 2 unattested record(s)" in err and "00000000-0000-4000-8000-000000000000" in err


def test_api_balance_ignores_forgeries_and_shows_a_deposit_made_after_them(
    forged_log: tuple[Path, Path, dict[str, str]], tmp_path: Path
) -> None:
    """Over HTTP: player:001's balance is the genuine one, player:999 is unknown; a deposit through the
    API after the forgeries is applied and answered (the pipeline seals when idle)."""
    tampered, ring, keys = forged_log
    genuine = sum(
        p["amount_minor"] for r in records(tampered)[:-2] if r["topic"] == topics.WALLET_EVENTS
        for p in r["payload"].get("postings", ()) if p["account"] == "player:001"
    )  # fmt: skip
    h = {"Authorization": f"Bearer {keys['cashier']}"}
    with running_server(tampered, f"sqlite:///{tmp_path / 'read.db'}", ring) as url:
        got = httpx.get(f"{url}/v1/accounts/player:001/balance", headers=h, timeout=30).json()
        assert got["balance_minor"] == genuine
        assert httpx.get(f"{url}/v1/accounts/player:999/balance", headers=h, timeout=30).status_code == 404
        body = {"account_id": "player:001", "amount_minor": 4_200, "currency": "EUR"}
        r = httpx.post(f"{url}/v1/cashier/deposits", json=body, headers={**h, "Idempotency-Key": "after"},
                       timeout=60)  # fmt: skip
        assert r.status_code == 201, r.text
        got = httpx.get(f"{url}/v1/accounts/player:001/balance", headers=h, timeout=30).json()
        assert got["balance_minor"] == genuine + 4_200


def test_the_projector_waits_at_a_forgery_after_the_last_seal_then_leaves_it_out(
    forged_log: tuple[Path, Path, dict[str, str]], tmp_path: Path
) -> None:
    """A chained forgery after every writer's last seal could still be followed by a signed head that
    covers it, as far as the log shows: the projector stops before it (pending). Once the wallet's writer
    writes and seals again, the forgery is left out for good (never), counted with its id, and the new
    deposit is applied."""
    tampered, ring_path, _ = forged_log
    ring = load_keyring(ring_path)
    engine = make_engine(f"sqlite:///{tmp_path / 'read.db'}")
    upgrade(engine)
    projector = Projector(engine, writers=writer_keys(ring.public_document()))
    with EmbeddedLog(tampered, readonly=True) as log:
        projector.catch_up(log)
        (first_forged,) = [o for o, _t, _k, raw in log.read_page(0, 100_000) if b"forged-0" in raw]
    assert projector.facts.pending_at == first_forged
    assert projector.position() < first_forged
    with engine.connect() as c:
        before = queries.balance(c, "player:002")["balance_minor"]
    deposit(tampered, ring, "player:002", 100)
    with EmbeddedLog(tampered, readonly=True) as log:
        projector.catch_up(log)
    assert projector.facts.pending_at is None
    assert projector.facts.unattested == 2
    assert projector.facts.first_ids[0] == "00000000-0000-4000-8000-000000000000"
    with engine.connect() as c:
        assert queries.balance(c, "player:002")["balance_minor"] == before + 100
    engine.dispose()


def test_a_production_log_never_trusts_the_public_demo_key(
    authentic: Authentic, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Anyone can sign with the public demo key (its seed is in the source). A forged deposit covered by
    a signed head made with it, appended to a log the demo keys did not write: with no keys supplied the
    read model applies nothing and says which keys to supply; with the log's public keyring, the genuine
    ledger and not the forgery."""
    from services.core.attest import AttestChain, attestation  # noqa: PLC0415 (the attacker's: public)
    from services.core.envelope import ChainHead  # noqa: PLC0415
    from services.runtime.keyring import demo_keyring  # noqa: PLC0415

    for name in ("CASINO_KEYRING", "CASINO_PUBLIC_KEYRING", "CASINO_DEMO_MODE"):
        monkeypatch.delenv(name, raising=False)
    log, ring_path, _ = authentic
    tampered = copy_log(log, tmp_path / "log.db")
    forged = forge(records(tampered), "deposit", "player:999", MILLION, 0, "template")
    chain = AttestChain("settlement.wallet")
    heads = {(topics.WALLET_EVENTS, "player:999"): ChainHead(0, forged["hash"])}
    guard = demo_keyring().guard(Principal.SETTLEMENT)
    ((_, signed),) = attestation(chain, heads, guard, occurred_at=forged["occurred_at"], seal="idle")
    append(tampered, [forged, json.loads(signed)], internal=False)
    assert main(["project", "--db", str(tampered)]) == 0
    assert "CASINO_PUBLIC_KEYRING" in capsys.readouterr().err
    assert main(["statement", "--db", str(tampered), "--account", "player:999"]) == 2
    public = tmp_path / "public.json"
    public.write_text(json.dumps(load_keyring(ring_path).public_document()))
    monkeypatch.setenv("CASINO_PUBLIC_KEYRING", str(public))
    assert main(["statement", "--db", str(tampered), "--account", "player:001", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)
    assert main(["statement", "--db", str(tampered), "--account", "player:999"]) == 2
