"""Which sessions carry an earnings reaction and which reports fall in a window, as known at the
origin, on the real earnings calendar (the ``HistoricalEarningsData`` wheel, a dependency)."""

from __future__ import annotations

from datetime import date

import numpy as np
import pytest

from agents.data.fundamentals.earnings import EarningsEvent
from agents.quant.risk import earnings as er

SESSIONS = np.array(
    ["2015-07-16", "2015-07-17", "2015-07-20", "2015-07-21", "2015-07-22", "2015-07-23", "2015-07-24"],
    dtype="datetime64[D]",
)


def _event(day: str, when: str) -> EarningsEvent:
    return EarningsEvent(
        symbol="X",
        report_date=date.fromisoformat(day),
        time_of_day=when,  # type: ignore[arg-type]
        eps_estimate=None,
        eps_actual=None,
        surprise=None,
    )


#: (report day, time of day, reaction sessions' first and last index in SESSIONS)
REACTIONS = [
    ("2015-07-21", "after_close", (4, 4)),  # reaction the next session, 07-22
    ("2015-07-21", "before_open", (3, 3)),  # the same session
    ("2015-07-21", "during_market", (3, 3)),
    ("2015-07-21", "unknown", (3, 4)),  # either: both count
    ("2015-07-18", "before_open", (2, 2)),  # a Saturday: the next session, 07-20
    ("2015-07-18", "after_close", (2, 2)),
]


@pytest.mark.parametrize(("day", "when", "span"), REACTIONS)
def test_reaction_sessions(day: str, when: str, span: tuple[int, int]) -> None:
    assert er.reaction_indices(_event(day, when), SESSIONS) == span


def test_the_spans_of_all_events_at_once_are_each_events_rule() -> None:
    events = [_event(day, when) for day, when, _ in REACTIONS]
    first, last = er.reaction_spans(events, SESSIONS)
    assert list(zip(first.tolist(), last.tolist(), strict=True)) == [span for *_, span in REACTIONS]
    # with the sessions cut after index 3: the next session is past the end (first == len), and an
    # unknown time's second session is cut to the last one
    first, last = er.reaction_spans(events, SESSIONS[:4])
    assert first.tolist() == [4, 3, 3, 3, 2, 2]
    assert last.tolist() == [3, 3, 3, 3, 2, 2]


def test_a_report_after_the_last_session_has_no_reaction_yet() -> None:
    assert er.reaction_indices(_event("2015-07-24", "after_close"), SESSIONS) is None
    mask = er.earnings_mask(
        [_event("2015-07-21", "after_close"), _event("2015-07-24", "after_close")], SESSIONS
    )
    assert mask.tolist() == [False, False, False, False, True, False, False]


def test_past_moves_need_the_report_and_every_reaction_session() -> None:
    log_ret = np.array([np.nan, 0.01, -0.02, 0.005, -0.04, 0.003, 0.001])
    moves = er.past_moves([_event("2015-07-21", "unknown")], SESSIONS, log_ret)
    assert len(moves) == 1 and moves[0].log_move == pytest.approx(0.005 - 0.04)
    # at the close of 07-21 an unknown-time report of that day is not yet known as reported
    assert er.past_moves([_event("2015-07-21", "unknown")], SESSIONS[:4], log_ret[:4]) == []


def test_announced_within_30_days_and_projected_beyond() -> None:
    events = [_event("2014-07-22", "after_close"), _event("2014-10-20", "after_close"),
              _event("2015-01-27", "after_close"), _event("2015-04-27", "after_close"),
              _event("2015-07-21", "after_close"), _event("2015-10-27", "after_close")]  # fmt: skip
    origin = date(2015, 7, 10)
    ups = er.upcoming(events, origin, after_habit=True, max_offset=80)
    # 07-21 is 11 days away (announced); 10-27 is not public yet, and 10-20 + 364 = 10-19 is its projection
    assert [(u.report_date, u.source) for u in ups] == [
        (date(2015, 7, 21), "announced"),
        (date(2015, 10, 19), "projected"),
    ]
    # 07-21 after the close → reaction on 07-22, the 8th session after 07-10
    assert ups[0].offset == 8


def test_unknown_time_report_on_the_origin_follows_the_company_habit() -> None:
    events = [_event("2015-07-21", "unknown")]
    after = er.upcoming(events, date(2015, 7, 21), after_habit=True, max_offset=5)
    before = er.upcoming(events, date(2015, 7, 21), after_habit=False, max_offset=5)
    assert [u.offset for u in after] == [1]
    assert before == []


def test_calendar_coverage_and_aliases() -> None:
    fb = er.company_events("FB")
    assert fb is not None and any(e.report_date == date(2015, 7, 29) for e in fb)
    goog = er.company_events("GOOG")
    assert goog is not None and any(e.report_date.year == 2013 for e in goog)  # filed under GOOGL then
    assert er.company_events("BHP") is None  # no coverage: not in the calendar
    aapl = er.company_events("AAPL")
    assert aapl is not None
    july = [e for e in aapl if e.report_date == date(2015, 7, 21)]
    assert july and july[0].time_of_day == "after_close"
