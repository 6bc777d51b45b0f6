"""What every step of the option plan shares (:mod:`agents.analysts.option_plan`): its inputs, the
tool runner that records calls, the reasons' shape and the constants of the rules."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import Any, Literal

from agents.analysts.outcome import ToolCallRecord
from agents.tools.envelope import ToolEnvelope

Right = Literal["put", "call"]
Runner = Callable[[str, dict[str, Any]], ToolEnvelope]

#: ADX(14) above 25 = a trending market (Wilder 1978).
ADX_TRENDING = 25.0
#: Estimating the next report from past ones (measured on the earnings calendar, 2,699 reports of
#: 2010-2015): the same quarter a year before + 364 days (same weekday) lands within 7 days of the
#: real date 95 % of the time (median 0) and is 7 days or more early 2.5 % of the time; the last
#: report + 91 days is within 15 days 95 % of the time. The margins are those errors.
YEAR_DAYS = 364
YEAR_MARGIN_DAYS = 7
QUARTER_DAYS = 91
QUARTER_MARGIN_DAYS = 14
#: A report date within this many days was announced by ``as_of`` (companies announce two to four
#: weeks ahead); a later one in the calendar is hindsight and is not used.
ANNOUNCED_DAYS = 14
#: Two prices are "the same unit" when their ratio is within 2 %: beyond it the chain and the
#: bars are quoted on different share bases (a split between them).
_SAME_UNIT = 0.02
CONTRACT_SHARES = 100


@dataclass(frozen=True)
class OptionPlanInputs:
    """What the option plan reads (plain values from the state, no state).

    Attributes:
        symbol / as_of: the analysis' ticker and date.
        right: ``put`` (cash-secured put) or ``call`` (covered call).
        technical / technical_ref: the ``technical_indicators`` data and its tool_call_id
            (``None`` when research found no price history: the chart analyst then refuses).
        chart: the chart levels ``{support_resistance, support_resistance_ref, fib, fib_ref}``.
        earnings / earnings_ref: the research stage's ``get_earnings_dates`` entry and id.
        run: runs a tool by name with the stage's context (its calls are recorded by the stage).
        hv_period: the HV window stated beside the forecast (``FINAGENT_OPTIONS_HV_PERIOD``).
        min_iv_forecast: the IV / σ-forecast floor (``FINAGENT_OPTIONS_MIN_IV_HV``).
        screen: screen arguments the request overrides (delta_min, min_open_interest, ...).
        cost_basis / shares: a call's shares (USD/share as given; shares held, default 100).
        account_value / max_name_pct / max_gap_loss_pct: the sizing (``None`` account: the paper
            portfolio's).
        check_events: whether dividend data is configured (``FINAGENT_OPTIONS_DIVIDENDS_DIR``).
    """

    symbol: str
    as_of: date
    right: Right
    technical: dict[str, Any] | None
    technical_ref: str | None
    chart: dict[str, Any] | None
    earnings: dict[str, Any] | None
    earnings_ref: str | None
    run: Runner
    hv_period: int = 20
    min_iv_forecast: float = 0.8
    screen: dict[str, Any] = field(default_factory=dict)
    cost_basis: float | None = None
    shares: int | None = None
    account_value: float | None = None
    max_name_pct: float = 0.20
    max_gap_loss_pct: float = 0.05
    check_events: bool = False

    @property
    def noun(self) -> str:
        """``put`` or ``call``: what the plan sells."""
        return self.right

    @property
    def strategy(self) -> str:
        """``cash-secured put`` or ``covered call``."""
        return "cash-secured put" if self.right == "put" else "covered call"


def reason(text: str, refs: Sequence[str | None]) -> dict[str, Any]:
    """A reason: ``{text, source_refs}`` (refs without the ``None`` s)."""
    return {"text": text, "source_refs": [r for r in refs if r]}


class Calls:
    """Runs tools and keeps their records in call order."""

    def __init__(self, run: Runner) -> None:
        self._run = run
        self.records: list[ToolCallRecord] = []

    def __call__(self, name: str, arguments: dict[str, Any]) -> ToolEnvelope:
        envelope = self._run(name, arguments)
        self.records.append(ToolCallRecord(name=name, envelope=envelope))
        return envelope


def error_reason(env: ToolEnvelope, what: str) -> dict[str, Any]:
    """The reason of a failed tool call: ``"<CODE>: <what>: <message>"``, citing the call."""
    assert env.error is not None
    return reason(f"{env.error.code.value}: {what}: {env.error.message}", [env.tool_call_id])


def _fmt(value: float, digits: int = 2) -> str:
    return f"{value:,.{digits}f}"
