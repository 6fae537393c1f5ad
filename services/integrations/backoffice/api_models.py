"""The back-office API's request and response models and parameter types (the OpenAPI document's
schemas): :mod:`services.integrations.backoffice.api` serves them."""

from typing import Annotated, Any, Literal

from fastapi import Header, Query
from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from services.core.boundary import is_player_account

Id = Annotated[str, Field(min_length=1, max_length=256, pattern=r"^\S+$")]


def _player_account(account_id: str) -> str:
    if not is_player_account(account_id):
        raise ValueError(
            "not_a_player_account: a table's, the cage's or the operator's account moves no money from here"
        )
    return account_id


PlayerAccount = Annotated[Id, AfterValidator(_player_account)]
"""A player's wallet (docs/trust.md): deposits, withdrawals and bets never name a table's account."""

Name = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[a-z][a-z0-9_]*$")]
Currency = Annotated[str, Field(pattern=r"^[A-Z]{3}$")]
Amount = Annotated[int, Field(gt=0, le=10**12, strict=True)]
IdempotencyKey = Annotated[str, Header(alias="Idempotency-Key", min_length=1, max_length=200,
                                       pattern=r"^[\x21-\x7e]+$")]  # fmt: skip
Format = Literal["json", "csv"]
TIME_PATTERN = r"^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|z|[+-]\d{2}:\d{2}))?$"
Time = Annotated[str | None, Query(pattern=TIME_PATTERN, description="RFC 3339 time or YYYY-MM-DD (UTC)")]
Day = Annotated[str | None, Query(pattern=r"^\d{4}-\d{2}-\d{2}$", description="gaming day YYYY-MM-DD")]
Cursor = Annotated[str | None, Query(pattern=r"^[0-9]{1,18}$", description="next_cursor of the page before")]



class Balance(BaseModel):
    account_id: str
    currency: str
    balance_minor: int


class StatementEntry(BaseModel):
    transfer_id: str
    occurred_at: str
    amount_minor: int
    balance_after_minor: int
    kind: str
    coup_id: str | None
    bet_id: str | None


class Statement(BaseModel):
    entries: list[StatementEntry]
    next_cursor: str | None


class TableReport(BaseModel):
    table_id: str
    day: str
    coups: int
    bets: int
    handle_minor: int
    win_minor: int = Field(
        description="what the house kept, commission included: all staked less all "
        "credited back (services.core.figures)"
    )
    commission_minor: int = Field(description="commission and levies the house took")
    hold_pct: float = Field(description="win over handle, in percent")
    paid_minor: int = Field(description="all credited back on bets (a player-banker's cover is no bet)")
    refused: int = Field(description="bets refused")
    bank_minor: int = Field(
        description="the player-banker's share: what the players holding the bank won "
        "(or lost, negative); 0 at a house-banked table"
    )


class ShiftReport(TableReport):
    shift: int


class Shifts(BaseModel):
    shifts: list[ShiftReport]


class RoundCard(BaseModel):
    n: int
    hand: str
    card: str
    shoe_position: int
    occurred_at: str


class RoundDecision(BaseModel):
    hand: str
    choice: str
    decided_by: str
    occurred_at: str


class RoundBet(BaseModel):
    bet_id: str
    account_id: str
    spot: str
    stake_minor: int
    currency: str
    status: str
    reason: str | None
    placed_at: str
    result: str | None
    win_minor: int | None
    commission_minor: int | None
    credit_minor: int | None
    balance_before_minor: int | None
    balance_after_minor: int | None
    payout_balance_before_minor: int | None
    payout_balance_after_minor: int | None


class Round(BaseModel):
    coup_id: str
    table_id: str
    shoe_id: str
    coup_number: int
    variant: str
    rules_version: str
    paytable: dict[str, Any]
    gaming_day: str
    shift: int
    status: str
    opened_at: str
    started_at: str | None
    ended_at: str | None
    outcome: str | None
    natural: bool | None
    hands: dict[str, Any] | None
    versus: dict[str, Any] | None
    events: list[Any] | None
    cards: list[RoundCard]
    decisions: list[RoundDecision]
    bets: list[RoundBet]


class RoundSummary(BaseModel):
    coup_id: str
    coup_number: int
    shoe_id: str
    outcome: str | None
    natural: bool | None
    hands: dict[str, Any]
    ended_at: str | None


class Rounds(BaseModel):
    rounds: list[RoundSummary]


class TableOverview(BaseModel):
    table_id: str
    variant: str
    rules_version: str
    currency: str
    shoe_id: str | None
    last_coup_id: str | None
    report: TableReport | None


class Tables(BaseModel):
    day: str | None
    position: int
    tables: list[TableOverview]


class RoadCell(BaseModel):
    col: int
    row: int
    value: str
    ties: int


class Roads(BaseModel):
    table_id: str
    shoe_id: str | None
    outcomes: list[str]
    bead_plate: list[RoadCell]
    big_road: list[RoadCell]
    big_eye_boy: list[RoadCell]
    small_road: list[RoadCell]
    cockroach_pig: list[RoadCell]


class Finding(BaseModel):
    event_id: str
    occurred_at: str
    table_id: str
    account_id: str | None
    reason: str
    severity: str
    subject: dict[str, Any]
    expected: Any
    recorded: Any
    detail: str


class Findings(BaseModel):
    findings: list[Finding]
    next_cursor: str | None


class Health(BaseModel):
    status: str


class MoneyCommand(BaseModel):
    """A deposit or withdrawal at the cashier."""

    model_config = ConfigDict(extra="forbid")
    account_id: PlayerAccount
    amount_minor: Amount
    currency: Currency


class BetCommand(BaseModel):
    """A bet from a table terminal (``bet_id`` derived from the Idempotency-Key when not given)."""

    model_config = ConfigDict(extra="forbid")
    account_id: PlayerAccount
    table_id: Id
    spot: Name
    stake_minor: Amount
    currency: Currency
    coup_id: Id | None = None
    bet_id: Id | None = None


class CommandAnswer(BaseModel):
    request_id: str
    account_id: str
    transfer_id: str | None = None
    bet_id: str | None = None
    status: str
    reason: str | None
    balance_minor: int


class ProblemBody(BaseModel):
    type: str
    title: str
    status: int
    detail: str


PROBLEMS: dict[int | str, dict[str, Any]] = {
    code: {"model": ProblemBody, "content": {"application/problem+json": {}}}
    for code in (400, 401, 403, 404, 409, 422, 503, 504)
}

