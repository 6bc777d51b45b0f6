"""The Python producer API in embedded mode: ``from pipeline import enqueue_analysis``."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date, timedelta
from pathlib import Path

import pytest

from core.settings import get_settings
from pipeline.service import InvalidRequestError


@pytest.fixture
def embedded(clean_settings: None) -> Iterator[None]:
    """Embedded settings; the process-wide in-process worker is stopped afterwards."""
    from pipeline.producer import stop_embedded_worker

    yield
    stop_embedded_worker()


@pytest.mark.usefixtures("embedded")
def test_enqueue_analysis_handle_and_session_follow_up() -> None:
    from datetime import date

    from pipeline import enqueue_analysis

    handle = enqueue_analysis(
        "ibm",
        as_of=date(2012, 6, 29),
        analysis_type="technical",
        options={"max_iterations": 2},
        session_id="s",
        settings=get_settings(),
    )
    assert handle.symbol == "IBM" and len(handle.id) == 36
    assert handle.status() in {"queued", "researching", "analyzing", "recommending", "reviewing", "done"}
    row = handle.wait(timeout=120)
    assert row["status"] == "done" and row["report"].startswith("# IBM") and row["max_iterations"] == 2

    follow = enqueue_analysis(query="and what about MSFT?", session_id="s", settings=get_settings())
    assert (follow.symbol, follow.analysis_type, follow.as_of) == ("MSFT", "technical", date(2012, 6, 29))
    assert follow.wait(timeout=120)["max_iterations"] == 2

    with pytest.raises(InvalidRequestError, match="AAPL1"):
        enqueue_analysis("AAPL1", settings=get_settings())


def test_unknown_symbol_error_names_the_symbol_once() -> None:
    from agents.data.market.embedded import EmbeddedProvider
    from pipeline.service import resolve_as_of

    with pytest.raises(InvalidRequestError) as info:
        resolve_as_of(provider=EmbeddedProvider(), symbol="ZZZZZ", as_of=None)
    assert str(info.value).startswith("ZZZZZ: not in the embedded dataset")
    assert str(info.value).count("ZZZZZ") == 1


# -- a csp request whose chain exists but whose price history does not ------------------------

OPTIONS_DIR = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "options"
SPY_CHAIN_DAY = date(2025, 5, 16)  # the CBOE SPY chain's quote date (shared/data/README.md)


@pytest.fixture
def options_dir() -> Path:
    """The shared option chains; skips when ../shared is absent."""
    if not (OPTIONS_DIR / "spy_2025-05-16").is_dir():
        pytest.skip(f"shared option chains not found at {OPTIONS_DIR} (only present in the workplace)")
    return OPTIONS_DIR.resolve()


@pytest.mark.usefixtures("embedded")
def test_a_csp_request_with_a_chain_but_no_history_ends_done_with_a_cited_no_data_rejection(
    options_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pipeline import enqueue_analysis

    monkeypatch.setenv("FINAGENT_OPTIONS_DIR", str(options_dir))
    # the embedded dataset has no SPY: a composite request is still refused before enqueuing
    with pytest.raises(InvalidRequestError, match="SPY: not in the embedded dataset"):
        enqueue_analysis("SPY", as_of=SPY_CHAIN_DAY, settings=get_settings())
    # a csp request needs a chain quoted on its as_of: the day before has none, no as_of neither
    with pytest.raises(InvalidRequestError, match="SPY"):
        enqueue_analysis(
            "SPY", as_of=SPY_CHAIN_DAY - timedelta(days=1), analysis_type="csp", settings=get_settings()
        )
    with pytest.raises(InvalidRequestError, match="SPY"):
        enqueue_analysis("SPY", analysis_type="csp", settings=get_settings())

    handle = enqueue_analysis("SPY", as_of=SPY_CHAIN_DAY, analysis_type="csp", settings=get_settings())
    row = handle.wait(timeout=120)
    assert row["status"] == "done", row.get("error")
    report = row["report_json"]
    csp = report["csp"]
    assert (csp["status"], csp["rejected_by"]) == ("rejected", "chart")
    (reason,) = csp["reasons"]
    assert reason["text"].startswith("NO_DATA: no price history of SPY up to 2025-05-16")
    # the chain that day prices SPY at its parity spot (its 589.25 print is after hours)
    assert "the chain quoted on 2025-05-16 prices SPY at 593.85" in reason["text"]
    assert "INVALID_SYMBOL: get_stock_data: SPY: not in the embedded dataset" in reason["text"]
    # the refusal cites the chain call and the failed quote call, the only calls made: the plan
    # stopped at the chart analyst
    chain_ref, quote_ref = reason["source_refs"]
    assert chain_ref.startswith("get_option_chain_") and quote_ref.startswith("get_stock_data_")
    tools = [t["tool"] for t in row["state"]["tool_history"]]
    assert tools == ["get_stock_data", "get_option_chain"]
    assert (
        row["report"]
        .splitlines()[2]
        .startswith(
            "**No cash-secured put**: rejected by the chart analyst: NO_DATA: no price history of SPY"
        )
    )
    # a covered call of the same symbol and day is answered the same way (one behaviour)
    call = enqueue_analysis(
        "SPY", as_of=SPY_CHAIN_DAY, analysis_type="covered_call", settings=get_settings()
    ).wait(timeout=120)
    assert call["status"] == "done", call.get("error")
    cc = call["report_json"]["covered_call"]
    assert (cc["status"], cc["rejected_by"]) == ("rejected", "chart")
    assert (
        cc["reasons"][0]["text"].split(" (INVALID_SYMBOL")[0] == reason["text"].split(" (INVALID_SYMBOL")[0]
    )


def test_a_csp_chain_lookup_is_refused_without_an_options_folder(clean_settings: None) -> None:
    from core.settings import get_settings
    from pipeline.service import AnalysisRequest, prepare_analysis

    # no FINAGENT_OPTIONS_DIR: the csp exception does not apply, the unknown symbol is refused
    with pytest.raises(InvalidRequestError, match="SPY: not in the embedded dataset"):
        prepare_analysis(
            request=AnalysisRequest(symbol="SPY", as_of=SPY_CHAIN_DAY, analysis_type="csp"),
            settings=get_settings(),
        )
