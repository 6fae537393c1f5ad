"""The monitor's sequential and pattern detectors (issue #13), with their constants: CUSUM tests
(:mod:`services.monitor.sequential`) of an account's edge, a shoe's bias, a group's edge, last-second
bets, edge sorting, bot regularity, linked hedges and paired play. Each a pure function of what the
table or account remembers and the event seen: what it remembers after and its alerts."""

from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction
from typing import Any, Final

from services.core.baccarat.coup import Coup
from services.core.ledger import Wager
from services.core.reasons import Detector, Severity
from services.core.values import replace
from services.monitor.alerts import Alert, Alerts, Seen, alert
from services.monitor.detectors import EVEN_MONEY_SPOTS, HEDGE_SIDES
from services.monitor.sequential import (
    MICRO,
    bet_increments,
    cusums,
    level,
    mixture_threshold,
    nats,
    run_length,
    run_probability,
    share,
)
from services.monitor.state import Link, Punter, TableWatch

EVIDENCE_MAX: Final = 32
"""Ids of coups and bets an alert lists as its evidence (the latest; ``evidence_count`` says how many
there were in all)."""

SIDE_P0: Final[Mapping[str, float]] = {"banker": 0.51, "player": 0.497}
"""Honest bounds on the chance that a side wins a decided coup: banker 50.68 %, player 49.32 % with 8
decks (:mod:`services.core.baccarat.odds`; 50.71 % for banker with one deck), rounded up by about
0.3 % for the small swings of a shoe's composition as it is dealt. Every test below errs towards
silence for any honest chance below these."""

EDGE_LAMBDAS: Final = (0.16, 0.28, 0.45, 0.8, 1.5)
"""Bet fractions of the betting martingales ``Π(1 + λ·w·(x − p0))`` run as CUSUMs over an account's,
a table's or a group's decided even-money outcomes: each is the growth-optimal one against a win rate
of about 55, 57, 60, 65 and 75-90 % (``λ* = (p1 − p0) / (p0 (1 − p0))``), so an edge anywhere in that
range is found at close to the best rate possible (a CUSUM over several alternatives)."""

SUSPECT_MICRO: Final = 1_000_000
"""An account whose ``account_edge`` CUSUM is at least 1 nat is a *suspect* for ``group_edge``."""

COBET_LINK: Final = 4
"""``group_edge``: an account that bet the group's side in this many of the group's coups in a row, and
never the other side between, is linked to the group (a co-betting graph, collapsed onto the group): it
is counted with the suspects while the link holds, so a syndicate whose members are each too lucky too
seldom to be suspects is observed in every coup one of them plays. Sound whoever is linked: the links are
fixed before the outcome."""

COBET_MAX: Final = 256
"""Co-betting links a table keeps (the longest runs)."""

LATE_MS: Final = 1_000
"""A bet placed less than this before the close is a last-second bet."""

LATE_P0: Final = 0.06
"""Honest bound on the share of last-second bets (docs/monitoring.md: humans bet seconds before the
close; at most 5 % of bets come in the last second, and none in its last half at a live table)."""

LATE_LAMBDAS: Final = (4.0, 9.0, 14.0)
"""Bet fractions against a last-second share of about 30, 60 and 90 % (``λ < 1/p0``)."""

LINK_MAX_BETTORS: Final = 64
"""Pairs are tested in coups with at most this many single-sided even-money bettors (2 016 pairs); in a
bigger crowd every side is full of strangers and the quadratic scan is left out (docs/monitoring.md)."""

LINK_MIN_HISTORY: Final = 6
"""Bets of an account (after the same previous winner) before its side habit is trusted."""

LINK_Q_MAX: Final = 0.75
"""Pairs whose own habits make opposite sides this likely or more are not tested: two loyal players on
opposite sides are explained by their habits, whatever they do."""

LINK_MARGIN: Final = 0.1
"""Added to the chance of opposite sides predicted by the two habits (an estimate), erring to silence."""

LINK_LAMBDAS: Final = (0.5, 0.95)
"""Fractions of ``1/q`` bet on "opposite" (``q``: the predicted chance)."""

LINK_KEPT: Final = 4096
"""Pairs followed per table; beyond it the longest unseen are forgotten."""


def _evidence(run: tuple[Any, ...], item: Any, stats: tuple[int, ...]) -> tuple[Any, ...]:
    """The run of evidence after one more observation: empty when every CUSUM stands at zero."""
    return (*run, item)[-EVIDENCE_MAX:] if any(stats) else ()


def _bets_subject(
    rec: Seen, account: str, coup_id: str, run: tuple[tuple[str, str], ...], count: int
) -> dict[str, Any]:
    """An alert's subject naming its evidence: the bets (and their coups) of the run, and how many."""
    bets, coups = [b for _, b in run], [c for c, _ in run]
    return {"event_ids": [rec.event_id], "account_id": account, "coup_id": coup_id,
            "bet_ids": bets, "coup_ids": coups, "evidence_count": count}  # fmt: skip


def _stats(stats: tuple[int, ...], n: int) -> tuple[int, ...]:
    return stats or (0,) * n


def account_edge(t: TableWatch, punter: Punter, wager: Wager, won: bool, rec: Seen) -> tuple[Punter, Alerts]:
    """One decided even-money bet into the account's stake-weighted CUSUMs (weight: the stake over the
    account's largest at the table, fixed before the outcome); alert and restart at the threshold."""
    max_stake = max(punter.max_stake, wager.stake_minor)
    weight = wager.stake_minor / max_stake
    incs = bet_increments(EDGE_LAMBDAS, weight, int(won), SIDE_P0[wager.spot])
    stats = cusums(_stats(punter.edge, len(EDGE_LAMBDAS)), incs)
    run = _evidence(punter.edge_run, (str(rec.coup_id), wager.bet_id), stats)
    count = punter.edge_count + 1 if any(stats) else 0
    punter = replace(punter, edge=stats, edge_run=run, edge_count=count, max_stake=max_stake)
    h = mixture_threshold(len(EDGE_LAMBDAS), t.crowd, Detector.ACCOUNT_EDGE)
    if max(stats) < h:
        return punter, []
    account = wager.account_id
    subject = _bets_subject(rec, account, str(rec.coup_id), run, count)
    observed = {"cusum_nats": nats(max(stats)), "bets": count}
    threshold = {"cusum_nats": nats(h), "p0": {k: str(v) for k, v in SIDE_P0.items()},
                 "lambdas": [str(x) for x in EDGE_LAMBDAS], "crowd_level": t.crowd,
                 "false_alarms_per_10k": str(share(Detector.ACCOUNT_EDGE))}  # fmt: skip
    detail = f"{account} wins more even-money bets than the odds allow: {count} bets, {nats(max(stats))} nats"
    found = alert(
        Detector.ACCOUNT_EDGE, Severity.WARNING, rec.key, subject=subject, observed=observed,
        threshold=threshold, detail=detail, honest_probability=f"{math.exp(-max(stats) / MICRO):.3g}",
        accounts=[account],
    )  # fmt: skip
    return replace(punter, edge=(), edge_run=(), edge_count=0), [found]


def shoe_bias(t: TableWatch, winner: str, rec: Seen) -> tuple[TableWatch, Alerts]:
    """The table's decided coups into two sets of CUSUMs (banker, player), kept across shoes: a stacked
    or slowly biased shoe makes one side win more than the odds allow. Alerts and restarts."""
    if winner not in EVEN_MONEY_SPOTS:
        return t, []
    out: Alerts = []
    bias, runs, counts = list(t.bias), list(t.bias_run), list(t.bias_count)
    h = mixture_threshold(len(EDGE_LAMBDAS), 2, Detector.SHOE_BIAS)
    for i, side in enumerate(EVEN_MONEY_SPOTS):
        incs = bet_increments(EDGE_LAMBDAS, 1.0, int(winner == side), SIDE_P0[side])
        stats = cusums(_stats(bias[i], len(EDGE_LAMBDAS)), incs)
        runs[i] = _evidence(runs[i], str(rec.coup_id), stats)
        counts[i] = counts[i] + 1 if any(stats) else 0
        bias[i] = stats
        if max(stats) < h:
            continue
        subject = {"event_ids": [rec.event_id], "coup_id": rec.coup_id, "shoe_id": rec.shoe_id,
                   "coup_ids": list(runs[i]), "evidence_count": counts[i]}  # fmt: skip
        observed = {"side": side, "cusum_nats": nats(max(stats)), "coups_in_run": counts[i]}
        threshold = {"cusum_nats": nats(h), "p0": str(SIDE_P0[side]),
                     "lambdas": [str(x) for x in EDGE_LAMBDAS],
                     "false_alarms_per_10k": str(share(Detector.SHOE_BIAS))}  # fmt: skip
        detail = (
            f"{side} wins more decided coups than the odds allow ({counts[i]} coups, {nats(max(stats))} nats)"
        )
        out.append(alert(
            Detector.SHOE_BIAS, Severity.WARNING, rec.key, subject=subject, observed=observed,
            threshold=threshold, detail=detail, honest_probability=f"{math.exp(-max(stats) / MICRO):.3g}",
        ))  # fmt: skip
        bias[i], runs[i], counts[i] = (), (), 0
    return replace(t, bias=(bias[0], bias[1]), bias_run=(runs[0], runs[1]),
                   bias_count=(counts[0], counts[1])), out  # fmt: skip


def _group_sides(t: TableWatch, coup: Coup) -> tuple[dict[str, int], dict[str, list[str]]]:
    """The stakes and accounts on each even-money side of the group: the suspects (accounts whose own
    edge CUSUM stands at :data:`SUSPECT_MICRO` or more) and the accounts linked to the group by
    co-betting (:data:`COBET_LINK`), all as they stood before the coup."""
    stakes = {"banker": 0, "player": 0}
    members: dict[str, list[str]] = {"banker": [], "player": []}
    for w in coup.wagers:
        if w.spot in stakes:
            p = t.punters.get(w.account_id)
            suspect = p is not None and bool(p.edge) and max(p.edge) >= SUSPECT_MICRO
            if suspect or t.cobet.get(w.account_id, 0) >= COBET_LINK:
                stakes[w.spot] += w.stake_minor
                members[w.spot].append(w.account_id)
    return stakes, members


def _cobet(t: TableWatch, coup: Coup, side: str) -> dict[str, int]:
    """The co-betting runs after a group coup on ``side``: one more for each account on it, broken for
    each account on the other side; the longest :data:`COBET_MAX` kept."""
    runs = dict(t.cobet)
    for w in coup.wagers:
        if w.spot == side:
            runs[w.account_id] = min(runs.get(w.account_id, 0) + 1, 1 << 20)
        elif w.spot in EVEN_MONEY_SPOTS:
            runs.pop(w.account_id, None)
    if len(runs) > COBET_MAX:
        runs = dict(sorted(runs.items(), key=lambda kv: (-kv[1], kv[0]))[:COBET_MAX])
    return runs


def group_edge(t: TableWatch, coup: Coup, winner: str, rec: Seen) -> tuple[TableWatch, Alerts]:
    """The group's majority side (the group: suspects and the accounts co-betting with them,
    :func:`_group_sides`; weight: the stake margin of that side over the other) into the table's group
    CUSUMs: a syndicate whose members each stay under their own threshold pools its evidence here.
    Sound whoever is in the group: it is fixed before the outcome and one coup is one observation,
    however many bet it."""
    if winner not in EVEN_MONEY_SPOTS:
        return t, []
    stakes, members = _group_sides(t, coup)
    total = stakes["banker"] + stakes["player"]
    if total == 0:
        return t, []
    side = "banker" if stakes["banker"] >= stakes["player"] else "player"
    weight = abs(stakes["banker"] - stakes["player"]) / total
    incs = bet_increments(EDGE_LAMBDAS, weight, int(winner == side), SIDE_P0[side])
    stats = cusums(_stats(t.group, len(EDGE_LAMBDAS)), incs)
    run = _evidence(t.group_run, str(rec.coup_id), stats)
    count = t.group_count + 1 if any(stats) else 0
    group = dict(t.group_members) if any(stats) else {}
    for a in members[side]:
        group[a] = group.get(a, 0) + 1
    if len(group) > 4 * EVIDENCE_MAX:
        group = dict(sorted(group.items(), key=lambda kv: (-kv[1], kv[0]))[:EVIDENCE_MAX])
    t = replace(
        t, group=stats, group_run=run, group_count=count, group_members=group, cobet=_cobet(t, coup, side)
    )
    h = mixture_threshold(len(EDGE_LAMBDAS), 1, Detector.GROUP_EDGE)
    if max(stats) < h:
        return t, []
    named = [a for a, _ in sorted(group.items(), key=lambda kv: (-kv[1], kv[0]))][:EVIDENCE_MAX]
    subject = {"event_ids": [rec.event_id], "coup_id": rec.coup_id, "coup_ids": list(run),
               "evidence_count": count, "account_ids": named,
               "account_id": named[0] if named else None}  # fmt: skip
    observed = {
        "cusum_nats": nats(max(stats)),
        "coups": count,
        "bets_by_account": {a: group[a] for a in named},
    }
    threshold = {"cusum_nats": nats(h), "suspect_nats": nats(SUSPECT_MICRO),
                 "lambdas": [str(x) for x in EDGE_LAMBDAS],
                 "false_alarms_per_10k": str(share(Detector.GROUP_EDGE))}  # fmt: skip
    detail = (
        f"accounts betting together win more than the odds allow: {', '.join(named[:6])} over {count} coups"
    )
    found = alert(
        Detector.GROUP_EDGE, Severity.WARNING, rec.key, subject=subject, observed=observed,
        threshold=threshold, detail=detail, honest_probability=f"{math.exp(-max(stats) / MICRO):.3g}",
        accounts=named,
    )  # fmt: skip
    return replace(t, group=(), group_run=(), group_count=0, group_members={}, cobet={}), [found]


def late_bets(t: TableWatch, closed_ms: int, rec: Seen) -> tuple[TableWatch, Alerts]:
    """At the close of betting: each accepted bet's lead before the close into its account's CUSUMs on
    last-second bets (under :data:`LATE_MS`); alert and restart at the threshold."""
    coup = t.coup
    if coup is None or not t.bet_at:
        return t, []
    out: Alerts = []
    h = mixture_threshold(len(LATE_LAMBDAS), t.crowd, Detector.LATE_BET)
    for w in coup.wagers:
        at = t.bet_at.get(w.bet_id)
        if at is None:
            continue
        lead = closed_ms - at
        p = t.punter(w.account_id)
        stats = cusums(
            _stats(p.lead, len(LATE_LAMBDAS)), bet_increments(LATE_LAMBDAS, 1.0, int(lead < LATE_MS), LATE_P0)
        )
        run = _evidence(p.lead_run, (coup.coup_id, w.bet_id), stats)
        count = p.lead_count + 1 if any(stats) else 0
        if max(stats) < h:
            if any(stats) or any(p.lead):  # an honest bettor's CUSUMs mostly stay at zero: nothing to keep
                t = t.with_punter(w.account_id, replace(p, lead=stats, lead_run=run, lead_count=count))
            continue
        subject = _bets_subject(rec, w.account_id, coup.coup_id, run, count)
        observed = {"cusum_nats": nats(max(stats)), "bets": count, "lead_ms": lead}
        threshold = {"cusum_nats": nats(h), "late_ms": LATE_MS, "p0": str(LATE_P0),
                     "false_alarms_per_10k": str(share(Detector.LATE_BET))}  # fmt: skip
        detail = f"{w.account_id} bets in the last second before the close far too often ({count} bets)"
        out.append(alert(
            Detector.LATE_BET, Severity.WARNING, rec.key, subject=subject, observed=observed,
            threshold=threshold, detail=detail, honest_probability=f"{math.exp(-max(stats) / MICRO):.3g}",
            accounts=[w.account_id],
        ))  # fmt: skip
        t = t.with_punter(w.account_id, replace(p, lead=(), lead_run=(), lead_count=0))
    return replace(t, bet_at={}), out


EDGE_RANKS: Final = frozenset("789")
"""First cards that favour player (a 7, 8 or 9 to player's first hand): what an edge sorter sees."""

EDGE_P0: Final = Fraction(3, 10)
"""Honest bound on the chance that a coup's first card is a 7, 8 or 9: 12/52 = 23.1 % in a full
shoe; rounded up to 30 % so that a depleted shoe stays within it. Bets are placed before the deal,
so an honest player bet is independent of the first card."""

P_SORT: Final = float(EDGE_P0)

SORT_LAMBDAS: Final = (0.6, 1.2, 2.0, 2.85)
"""Bet fractions of ``edge_sorting``'s martingales ``Π(1 + λ·w·(x − 3/10))`` (``x``: the first card
is a 7, 8 or 9; ``w``: the stake over the account's largest, fixed before the deal), below
``1/p0 = 10/3``: growth-optimal against about 40, 50, 65 and 90 % of (stake-weighted) player bets
with such a card. 2.85 is issue #13's single test (9/10 against 3/10); the lower ones find an edge
sorter who dilutes his bets with small decoys or only sometimes knows the card."""

SORT_FLAT: Final = 2.85
"""One more martingale at issue #13's fraction, every player bet weighing 1 (stake ignored): a sorter
whose stakes vary without telling anything is found by it about as fast as before the weighting."""

BOT_JITTER_MS: Final = 50
"""Delays after the window opened that differ by at most this are "the same timing"."""

BOT_REPEAT_MAX: Final = Fraction(1, 4)
"""Honest bound on the chance that a player's bet repeats the previous coup's exact stake *and*
timing to within :data:`BOT_JITTER_MS` (each at most 1/2; a human's reaction time varies by far more
than 50 ms)."""

BOT_RUN: Final = run_length(BOT_REPEAT_MAX, 8 * 10_000, share(Detector.BOT_REGULARITY))
"""Consecutive identical (stake, timing) bets that raise ``bot_regularity`` at a table of up to 8 bets
a coup: the least ``k`` with ``80 000 · (1/4)^k ≤ 1/20`` (its share of the budget; one check per bet):
11. A more crowded table needs more (the crowd level's count of checks)."""

PAIR_REPEAT_MAX: Final = Fraction(1, 2)
"""Honest bound on the chance that a punter at a player-banked game faces the same banker as at his
previous coup there (the bank passes from player to player)."""

PAIR_RUN: Final = run_length(PAIR_REPEAT_MAX, 8 * 10_000, share(Detector.PAIRED_PLAY))
"""Consecutive coups against the same banker that raise ``paired_play`` (chip dumping): the least
``k`` with ``80 000 · (1/2)^k ≤ 1/20`` (its share of the budget): 21."""


def edge_sorting(
    punter: Punter, wager: Wager, first_card: str, rec: Seen, crowd: int = 8
) -> tuple[Punter, Alerts]:
    """Stake-weighted CUSUMs over an account's player bets: does the coup's first card (dealt after
    the bet) favour player far more often than chance, on the bets it stakes most? Weight: the stake
    over the account's largest even-money stake at the table (fixed before the deal, so that honest
    bets, independent of the card, keep every martingale's mean at most 1). Alerts and restarts at
    ``h = ln(K · crowd · 10 000 / share)`` (``K``: the weighted CUSUMs and the unweighted one)."""
    hit = int(first_card[:1] in EDGE_RANKS)
    weight = wager.stake_minor / max(punter.max_stake, wager.stake_minor)
    incs = bet_increments(SORT_LAMBDAS, weight, hit, P_SORT) + bet_increments((SORT_FLAT,), 1.0, hit, P_SORT)
    stats = cusums(_stats(punter.sort, len(incs)), incs)
    s = max(stats)
    bets = (*punter.edge_bets, wager.bet_id)[-64:] if s > 0 else ()
    h = mixture_threshold(len(incs), crowd, Detector.EDGE_SORTING)
    if s < h:
        return replace(punter, sort=stats, edge_bets=bets), []
    subject = {"event_ids": [rec.event_id], "bet_ids": list(bets), "account_id": wager.account_id,
               "coup_id": rec.coup_id}  # fmt: skip
    observed = {"cusum_nats": nats(s), "bets_in_run": len(bets), "first_card": first_card}
    threshold = {"cusum_nats": nats(h), "p0": str(EDGE_P0), "lambdas": [str(x) for x in SORT_LAMBDAS],
                 "ranks": sorted(EDGE_RANKS), "crowd_level": crowd}  # fmt: skip
    detail = f"{wager.account_id}'s player bets come with a 7, 8 or 9 first card far too often"
    found = alert(
        Detector.EDGE_SORTING, Severity.WARNING, rec.key, subject=subject, observed=observed,
        threshold=threshold, detail=detail, honest_probability=f"{math.exp(-s / 1e6):.3g}",
    )  # fmt: skip
    return replace(punter, sort=(), edge_bets=()), [found]


def bot_regularity(
    punter: Punter, wager: Wager, delay_ms: int, rec: Seen, crowd: int = 8
) -> tuple[Punter, Alerts]:
    """An account's first bet of each coup: the same stake and the same timing after the window opened
    (within :data:`BOT_JITTER_MS`) :data:`BOT_RUN` coups in a row."""
    run = punter.bot
    if run and (run[-1][1] != wager.stake_minor or abs(run[-1][2] - delay_ms) > BOT_JITTER_MS):
        run = ()
    needed = max(BOT_RUN, run_length(BOT_REPEAT_MAX, crowd * 10_000, share(Detector.BOT_REGULARITY)))
    run = (*run, (wager.bet_id, wager.stake_minor, delay_ms))[-needed:]
    if len(run) < needed:
        return replace(punter, bot=run), []
    subject = {"event_ids": [rec.event_id], "bet_ids": [b for b, _, _ in run],
               "account_id": wager.account_id, "coup_id": rec.coup_id}  # fmt: skip
    observed = {"bets": len(run), "stake_minor": wager.stake_minor, "delays_ms": [d for _, _, d in run]}
    threshold = {"run": needed, "jitter_ms": BOT_JITTER_MS, "repeat_probability_max": str(BOT_REPEAT_MAX)}
    detail = (
        f"{wager.account_id} bet {wager.stake_minor} about {delay_ms} ms after the window opened, "
        f"{len(run)} coups in a row"
    )
    found = alert(
        Detector.BOT_REGULARITY, Severity.WARNING, rec.key, subject=subject, observed=observed,
        threshold=threshold, detail=detail, honest_probability=run_probability(BOT_REPEAT_MAX, needed - 1),
    )  # fmt: skip
    return replace(punter, bot=()), [found]


def _banker_share(habit: tuple[int, int, int, int], after: str) -> float | None:
    """The account's own chance of betting banker after ``after`` won (Laplace), or ``None`` if it has
    not bet often enough in that case."""
    b, n = (habit[0], habit[1]) if after == "banker" else (habit[2], habit[3])
    return None if n < LINK_MIN_HISTORY else (b + 1) / (n + 2)


def _with_habit(habit: tuple[int, int, int, int], after: str, side: str) -> tuple[int, int, int, int]:
    banker = int(side == "banker")
    if after == "banker":
        return (habit[0] + banker, habit[1] + 1, habit[2], habit[3])
    if after == "player":
        return (habit[0], habit[1], habit[2] + banker, habit[3] + 1)
    return habit


def _link_alert(pair: tuple[str, str], link: Link, *, q: float, h: int, coup_id: str, rec: Seen) -> Alert:
    """The ``linked_hedge`` alert of the pair ``a``, ``b`` (both named, with the bets of the run)."""
    (a, b), run, count = pair, link.run, link.count
    subject = {"event_ids": [rec.event_id], "account_ids": [a, b], "account_id": a, "coup_id": coup_id,
               "coup_ids": [c for c, _, _ in run], "bet_ids": [x for _, p, r in run for x in (p, r)],
               "evidence_count": count}  # fmt: skip
    stat = max(link.stats)
    observed = {"cusum_nats": nats(stat), "coups": count, "opposite_predicted": f"{q - LINK_MARGIN:.3f}"}
    threshold = {"cusum_nats": nats(h), "margin": str(LINK_MARGIN), "q_max": str(LINK_Q_MAX),
                 "false_alarms_per_10k": str(share(Detector.LINKED_HEDGE))}  # fmt: skip
    detail = f"{a} and {b} take opposite sides far more often than their habits explain ({count} coups)"
    return alert(
        Detector.LINKED_HEDGE, Severity.WARNING, rec.key, subject=subject, observed=observed,
        threshold=threshold, detail=detail, honest_probability=f"{math.exp(-stat / MICRO):.3g}",
        accounts=[a, b],
    )  # fmt: skip


def _singles(coup: Coup) -> dict[str, tuple[str, int, str]]:
    """The coup's accounts on one even-money side only: their side, stake and (last) bet id."""
    single: dict[str, tuple[str, int, str]] = {}
    both: set[str] = set()
    for w in coup.wagers:
        if w.spot in HEDGE_SIDES:
            known = single.get(w.account_id)
            if known is not None and known[0] != w.spot:
                both.add(w.account_id)
            stake = w.stake_minor + (known[1] if known else 0)
            single[w.account_id] = (w.spot, stake, w.bet_id)
    return {a: v for a, v in single.items() if a not in both}


def linked_hedge(t: TableWatch, coup: Coup, rec: Seen) -> tuple[TableWatch, Alerts]:
    """At the coup's end: for each pair of single-sided even-money bettors, whether they stood on
    opposite sides, against the chance their own habits give it (each account's share of banker bets
    after the same previous winner, independent of the other's): a CUSUM per pair on the excess, the
    stakes left aside (a dumper's stake may be split or set apart from its partner's). Two loyal
    players on opposite sides, or two
    players following the last winner, are explained by their habits and never tested. (Each account's
    habit is then updated by :func:`on_coup_resolved` with the coup's other per-bet updates.)"""
    single = _singles(coup)
    after = t.last_winner
    if after not in EVEN_MONEY_SPOTS or not 2 <= len(single) <= LINK_MAX_BETTORS:
        return t, []
    return _test_pairs(t, single, after, coup, rec)


def _test_pairs(
    t: TableWatch, single: dict[str, tuple[str, int, str]], after: str, coup: Coup, rec: Seen
) -> tuple[TableWatch, Alerts]:
    """:func:`linked_hedge`'s test of every pair whose habits are known (see there)."""
    shares = {a: f for a in single if (f := _banker_share(t.punter(a).habit, after)) is not None}
    known = sorted(shares)
    pairs = dict(t.pairs)
    out: Alerts = []
    crowd = max(t.pair_crowd, level(len(known) * (len(known) - 1) // 2))
    h = mixture_threshold(len(LINK_LAMBDAS), crowd, Detector.LINKED_HEDGE)
    for i, a in enumerate(known):
        fa, (sa, _, ba) = shares[a], single[a]
        for b in known[i + 1 :]:
            fb, (sb, _, bb) = shares[b], single[b]
            q = fa * (1 - fb) + (1 - fa) * fb
            y = int(sa != sb)
            key = f"{a}|{b}"
            link = pairs.get(key)
            if q > LINK_Q_MAX or (link is None and not y):
                continue
            link = link or Link()
            q = min(1.0, q + LINK_MARGIN)
            incs = tuple(math.floor(math.log1p(lam / q * (y - q)) * MICRO) for lam in LINK_LAMBDAS)
            stats = cusums(_stats(link.stats, len(LINK_LAMBDAS)), incs)
            run = _evidence(link.run, (coup.coup_id, ba, bb), stats)
            found = Link(stats, coup.number, run, link.count + 1 if any(stats) else 0)
            if max(stats) < h:
                pairs[key] = found
                continue
            pairs[key] = Link((), coup.number, (), 0)
            out.append(_link_alert((a, b), found, q=q, h=h, coup_id=coup.coup_id, rec=rec))
    if len(pairs) > LINK_KEPT:
        pairs = dict(sorted(pairs.items(), key=lambda kv: (-kv[1].seen, kv[0]))[: LINK_KEPT * 3 // 4])
    return replace(t, pairs=pairs, pair_crowd=crowd), out


def paired_play(punter: Punter, wager: Wager, banker: str, rec: Seen) -> tuple[Punter, Alerts]:
    """A punter at a player-banked game facing the same banker :data:`PAIR_RUN` coups in a row: money
    can be passed from one to the other by losing on purpose (chip dumping)."""
    run = (*punter.faced_run, wager.bet_id) if punter.faced == banker else (wager.bet_id,)
    run = run[-PAIR_RUN:]
    if len(run) < PAIR_RUN:
        return replace(punter, faced=banker, faced_run=run), []
    subject = {"event_ids": [rec.event_id], "bet_ids": list(run), "account_id": wager.account_id,
               "account_ids": [wager.account_id, banker], "coup_id": rec.coup_id}  # fmt: skip
    threshold = {"run": PAIR_RUN, "repeat_probability_max": str(PAIR_REPEAT_MAX)}
    detail = f"{wager.account_id} played against banker {banker} {len(run)} coups in a row"
    found = alert(
        Detector.PAIRED_PLAY, Severity.WARNING, rec.key, subject=subject,
        observed={"coups": len(run), "banker": banker}, threshold=threshold, detail=detail,
        honest_probability=run_probability(PAIR_REPEAT_MAX, PAIR_RUN - 1),
    )  # fmt: skip
    return replace(punter, faced=banker, faced_run=()), [found]
