"""The monitor's table-event handlers: each folds one table event into what the monitor knows of the
table, calling the detectors (:data:`HANDLERS`, by payload class)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, Final, TypeVar

from services.core.baccarat import CoupResult, TableConfig, Variant, get_variant
from services.core.baccarat.coup import Coup, coup_opened, result_of, wager_of
from services.core.contract import (
    BetAccepted,
    BetRefused,
    BettingClosed,
    BettingOpened,
    CardDealt,
    CommandRefused,
    CoupResolved,
    Payload,
    ShoeClosed,
    ShoeOpened,
    TableOpened,
)
from services.core.ledger import Wager, amounts_of
from services.core.values import replace
from services.monitor.alerts import Alerts, Seen
from services.monitor.detectors import (
    EVEN_MONEY_SPOTS,
    HEDGE_SIDES,
    STATISTICAL_VARIANTS,
    card_not_due,
    card_overcount,
    hedged_bets,
    net_outlier,
    past_posting,
    shoe_position,
    structuring,
    win_streak,
)
from services.monitor.sequential import level
from services.monitor.sequential_detectors import (
    _singles,
    _with_habit,
    account_edge,
    bot_regularity,
    edge_sorting,
    group_edge,
    late_bets,
    linked_hedge,
    paired_play,
    shoe_bias,
)
from services.monitor.state import ShoeWatch, TableWatch


def millis(timestamp: str) -> int:
    """An RFC 3339 UTC timestamp in milliseconds since the epoch."""
    at = datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    return round(at.timestamp() * 1000)


E = TypeVar("E", bound=Payload)
Handler = Callable[[TableWatch, E, Seen], tuple[TableWatch, Alerts]]
"""A table event's handler: the table, the typed event and where it was seen; the table after it."""


def on_table_opened(t: TableWatch, opened: TableOpened, rec: Seen) -> tuple[TableWatch, Alerts]:
    """Remember the configuration (checked against the registry) and each spot's maximum stake."""
    config = TableConfig.from_dict(opened.config.model_dump(mode="json"))
    get_variant(config.variant)
    limits = {s: v.max_minor for s, v in opened.limits.items()}
    return replace(t, config=config, max_minor=limits), []


def on_shoe_opened(t: TableWatch, opened: ShoeOpened, rec: Seen) -> tuple[TableWatch, Alerts]:
    """A new shoe: fresh card counts and positions."""
    return replace(t, shoe=ShoeWatch(opened.shoe_id, opened.decks)), []


def on_shoe_closed(t: TableWatch, closed: ShoeClosed, rec: Seen) -> tuple[TableWatch, Alerts]:
    """The shoe is done: forget it."""
    return replace(t, shoe=None), []


def on_betting_opened(t: TableWatch, opened: BettingOpened, rec: Seen) -> tuple[TableWatch, Alerts]:
    """The next coup: the table's coup clock advances; an unresolved earlier coup is dropped."""
    number = t.coups + 1
    coup = replace(coup_opened(opened, rec.occurred_at), number=number)
    return replace(t, coups=number, coup=coup, hedged=frozenset(), delays={}, opened_at=rec.occurred_at,
                   first_card="", bet_at={}), []  # fmt: skip


def on_bet_accepted(t: TableWatch, bet: BetAccepted, rec: Seen) -> tuple[TableWatch, Alerts]:
    """Keep the bet for grading; look for a hedge in the coup and for structuring."""
    wager = wager_of(bet)
    if t.coup is None or t.coup.coup_id != bet.coup_id:  # its BettingOpened not seen: a coup of its own
        t = replace(t, coup=Coup(bet.coup_id, t.coups, "betting", ""), hedged=frozenset(), delays={})
    assert t.coup is not None
    hedged, out = hedged_bets(t.coup, t.hedged, wager, rec)
    at = {**t.bet_at, wager.bet_id: millis(rec.occurred_at)}
    max_minor = t.max_minor.get(wager.spot)
    punter, more = structuring(t.punter(wager.account_id), wager, max_minor, t.coups, rec)
    delays = t.delays
    if wager.account_id not in t.delays and t.opened_at and wager.spot in HEDGE_SIDES:
        delay = at[wager.bet_id] - millis(t.opened_at)
        delays = {**t.delays, wager.account_id: delay}
        punter, bot = bot_regularity(punter, wager, delay, rec, t.crowd)
        more = more + bot
    t = replace(t, coup=t.coup.accept(wager), hedged=hedged, bet_at=at, delays=delays)
    return t.with_punter(wager.account_id, punter), out + more


def on_betting_closed(t: TableWatch, closed: BettingClosed, rec: Seen) -> tuple[TableWatch, Alerts]:
    """The close of betting: each bet's lead before it (last-second bets)."""
    if t.coup is None or t.coup.coup_id != closed.coup_id:
        return replace(t, bet_at={}), []
    t = replace(t, crowd=max(t.crowd, level(len(t.coup.wagers))))
    return late_bets(t, millis(rec.occurred_at), rec)


def on_bet_refused(t: TableWatch, refused: BetRefused, rec: Seen) -> tuple[TableWatch, Alerts]:
    """A refused bet: past posting when it came too late."""
    account = refused.account_id
    punter, out = past_posting(t.punter(account), t.coups, refused, rec)
    return (t.with_punter(account, punter) if out else t), out


def on_command_refused(t: TableWatch, refused: CommandRefused, rec: Seen) -> tuple[TableWatch, Alerts]:
    """A refused command: shoe tampering when it was a card nobody asked for."""
    shoe, out = card_not_due(t.shoe, refused, rec)
    return replace(t, shoe=shoe), out


def on_card_dealt(t: TableWatch, dealt: CardDealt, rec: Seen) -> tuple[TableWatch, Alerts]:
    """Count the card in its shoe and check its position."""
    shoe = t.shoe
    if shoe is None or shoe.shoe_id != dealt.shoe_id:
        shoe = ShoeWatch(dealt.shoe_id, t.config.decks if t.config else None)
    shoe, out = card_overcount(shoe, dealt.card, rec)
    shoe, more = shoe_position(shoe, dealt.shoe_position, rec)
    first = t.first_card or (dealt.card if dealt.hand == "player" else "")
    return replace(t, shoe=shoe, first_card=first), out + more


def on_coup_resolved(t: TableWatch, resolved: CoupResolved, rec: Seen) -> tuple[TableWatch, Alerts]:
    """Grade the coup's even-money bets and run the streak and net-result tests per account."""
    coup, t = t.coup, replace(t, coup=None)
    if coup is None or coup.coup_id != resolved.coup_id or t.config is None:
        return t, []
    config = t.config
    out: Alerts = []
    banks = [w.account_id for w in coup.wagers if w.spot == "bank"]
    if banks:
        for wager in coup.wagers:
            if wager.account_id != banks[0] and wager.spot not in ("bank", "bank_cover"):
                punter, found = paired_play(t.punter(wager.account_id), wager, banks[0], rec)
                t = t.with_punter(wager.account_id, punter)
                out += found
    if config.variant not in STATISTICAL_VARIANTS:
        return t, out
    if len(coup.wagers) > t.crowd:
        t = replace(t, crowd=level(len(coup.wagers)))
    winner = resolved.outcome
    t, more = linked_hedge(t, coup, rec)
    out += more
    t, more = shoe_bias(t, winner, rec)
    out += more
    t, more = group_edge(t, coup, winner, rec)
    out += more
    variant = get_variant(config.variant)
    result = result_of(resolved, variant.hands(config))
    single = _singles(coup) if t.last_winner in EVEN_MONEY_SPOTS else {}
    for wager in coup.wagers:
        if wager.spot not in EVEN_MONEY_SPOTS:
            continue
        punter = t.punter(wager.account_id)
        if wager.account_id in single:  # its side habit, once per coup (linked_hedge's)
            punter = replace(
                punter, habit=_with_habit(punter.habit, t.last_winner, single.pop(wager.account_id)[0])
            )
        if wager.spot == "player" and t.first_card:
            punter, found = edge_sorting(punter, wager, t.first_card, rec, t.crowd)
            out += found
        net = _net_minor(variant, config, result, wager)
        if net is not None:
            punter, found = account_edge(t, punter, wager, net > 0, rec)
            punter, a = win_streak(punter, wager, net > 0, rec)
            punter, b = net_outlier(punter, wager, net, rec)
            out += found + a + b
        t = t.with_punter(wager.account_id, punter)
    if winner in EVEN_MONEY_SPOTS:
        t = replace(t, last_winner=winner)
    return t, out


def _net_minor(variant: Variant, config: TableConfig, result: CoupResult, wager: Wager) -> int | None:
    """The bet's net result in minor units by the variant's own grade, or ``None`` for a push."""
    grade = variant.grade(result, wager.spot, config)
    if grade.result == "push":
        return None
    s = amounts_of(wager.stake_minor, grade, config.commission_rounding)
    return s.credit_minor - s.stake_minor


HANDLERS: Final[Mapping[type[Payload], Handler[Any]]] = {
    TableOpened: on_table_opened,
    ShoeOpened: on_shoe_opened,
    ShoeClosed: on_shoe_closed,
    BettingOpened: on_betting_opened,
    BetAccepted: on_bet_accepted,
    BetRefused: on_bet_refused,
    BettingClosed: on_betting_closed,
    CommandRefused: on_command_refused,
    CardDealt: on_card_dealt,
    CoupResolved: on_coup_resolved,
}
"""The table events the monitor reads; every other type passes without effect."""
