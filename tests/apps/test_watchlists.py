"""Watchlist schedules (cron → latest fire time), due detection inputs and digest rendering."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from apps.watchlists import (
    WatchlistError,
    build_digest,
    digest_html,
    digest_markdown,
    last_fire_time,
    parse_schedule,
)

NY = "America/New_York"


def test_default_schedule_fires_weekdays_after_the_close() -> None:
    # Friday 2026-11-20 22:00 New York (03:00 UTC Saturday) → that Friday 21:30
    fire = last_fire_time(schedule="30 21 * * 1-5", timezone=NY, now=datetime(2026, 11, 21, 3, 0, tzinfo=UTC))
    assert fire is not None and fire.isoformat() == "2026-11-20T21:30:00-05:00"
    # Sunday noon → still Friday's run (no weekend runs)
    fire = last_fire_time(
        schedule="30 21 * * 1-5", timezone=NY, now=datetime(2026, 11, 22, 17, 0, tzinfo=UTC)
    )
    assert fire is not None and fire.date() == date(2026, 11, 20)
    # Monday 21:29 New York → Friday; 21:30 → Monday
    before = last_fire_time(
        schedule="30 21 * * 1-5", timezone=NY, now=datetime(2026, 11, 24, 2, 29, tzinfo=UTC)
    )
    at = last_fire_time(schedule="30 21 * * 1-5", timezone=NY, now=datetime(2026, 11, 24, 2, 30, tzinfo=UTC))
    assert before is not None and before.date() == date(2026, 11, 20)
    assert at is not None and at.date() == date(2026, 11, 23)


def test_daylight_saving_time_keeps_local_wall_clock() -> None:
    # July: New York is UTC-4, so 21:30 local is 01:30 UTC next day
    fire = last_fire_time(schedule="30 21 * * *", timezone=NY, now=datetime(2026, 7, 2, 1, 45, tzinfo=UTC))
    assert fire is not None and fire.isoformat() == "2026-07-01T21:30:00-04:00"


@pytest.mark.parametrize("bad", ["30 21 * *", "61 21 * * *", "30 25 * * *", "x y z w v"])
def test_invalid_schedules_are_refused(bad: str) -> None:
    with pytest.raises(WatchlistError, match="schedule"):
        parse_schedule(bad)


def _item(symbol: str, signal: str | None, *, status: str = "done", refused: str | None = None) -> dict:
    return {
        "symbol": symbol,
        "status": "refused" if refused else "enqueued",
        "analysis_id": None if refused else f"id-{symbol}",
        "error": refused,
        "analysis_status": None if refused else status,
        "signal": signal,
        "confidence": 0.5 if signal else None,
        "p_outperform": 0.46 if signal else None,
        "analysis_error": "research failed: boom" if status == "failed" else None,
        "as_of": None if refused else date(2012, 6, 29),
    }


def test_digest_reports_changes_and_failures_with_reasons() -> None:
    previous = [_item("AAPL", "BUY"), _item("MSFT", "HOLD")]
    items = [
        _item("AAPL", "SELL"),
        _item("MSFT", "HOLD"),
        _item("IBM", "BUY"),
        _item("GOOG", None, status="failed"),
        _item("SLOW", None, status="analyzing"),
        # a refusal stored before the prefix was named once (service + provider) is shown once too
        _item("ZZZZ", None, refused="ZZZZ: ZZZZ: not in the embedded dataset"),
    ]
    digest = build_digest(
        name="tech",
        run_date=date(2012, 7, 2),
        items=items,
        previous_date=date(2012, 6, 29),
        previous_items=previous,
        timeout_s=7200,
    )
    rows = {r["symbol"]: r for r in digest["tickers"]}
    assert rows["AAPL"]["change"] == "BUY → SELL" and rows["AAPL"]["previous_signal"] == "BUY"
    assert rows["MSFT"]["change"] == "unchanged"
    assert rows["IBM"]["change"] == "new"
    assert rows["GOOG"]["outcome"] == "failed" and rows["GOOG"]["error"] == "research failed: boom"
    assert "did not finish within 7200 s" in rows["SLOW"]["error"]
    assert rows["ZZZZ"]["error"] == "ZZZZ: not in the embedded dataset"  # named once
    assert digest["counts"] == {
        "tickers": 6,
        "ok": 3,
        "failed": 3,
        "changed": 1,
        "refused": 1,
        "refused_by_quota": 0,
    }

    # the digest shows the calibrated p; the raw confidence is no evidence: only under details
    assert rows["AAPL"]["p_outperform"] == 0.46 and "confidence" not in rows["AAPL"]
    assert rows["AAPL"]["details"] == {"confidence": 0.5}
    md = digest_markdown(digest)
    assert "| ticker | signal | p(outperform, 20d) |" in md
    assert "| AAPL | SELL | 0.46 | BUY → SELL | 2012-06-29 |" in md
    assert "- **ZZZZ**: not in the embedded dataset\n" in md + "\n"
    page = digest_html(digest)
    assert "<td>AAPL</td><td>SELL</td>" in page and "<li><strong>GOOG</strong>" in page


def test_an_abstained_ticker_reads_no_evidence_in_every_digest_form() -> None:
    """A ticker whose raw SELL (confidence 0.79) the calibration suppressed: the digest says HOLD
    at 0.50 with "no evidence", and no form shows the 0.79 outside the JSON's details."""
    item = {**_item("AAPL", "HOLD"), "confidence": 0.79, "p_outperform": 0.5, "headline": "HOLD: no evidence"}
    digest = build_digest(
        name="tech",
        run_date=date(2012, 7, 2),
        items=[item],
        previous_date=None,
        previous_items=[],
        timeout_s=60,
    )
    (row,) = digest["tickers"]
    assert row["headline"] == "HOLD: no evidence" and row["details"] == {"confidence": 0.79}
    md, page = digest_markdown(digest), digest_html(digest)
    assert "| AAPL | HOLD | 0.50 (no evidence) | new |" in md
    assert "<td>0.50 (no evidence)</td>" in page
    assert "0.79" not in md and "0.79" not in page


def test_digest_html_escapes_values() -> None:
    digest = build_digest(
        name="<script>",
        run_date=date(2012, 7, 2),
        items=[_item("ZZZZ", None, refused="<b>bad</b>")],
        previous_date=None,
        previous_items=[],
        timeout_s=60,
    )
    page = digest_html(digest)
    assert "<script>" not in page and "&lt;b&gt;bad&lt;/b&gt;" in page
