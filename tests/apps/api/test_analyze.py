"""``POST /analyze`` refuses a ticker with junk with 422 ``{"detail": …}`` naming the characters
(the CLI's rule, ``core.tickers.refuse_junk``), enqueues nothing, and echoes at most
200 characters of the input; a question with prose punctuation is not junk."""

from __future__ import annotations

import httpx
import pytest

from core.settings import Settings
from db import ledger, repo
from db.engine import get_engine


def _post(gateway: tuple[str, str, Settings], body: dict[str, str]) -> httpx.Response:
    base, key, _ = gateway
    return httpx.post(f"{base}/analyze", json=body, headers={"X-API-Key": key}, timeout=30)


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ({"query": "AAPL;DROP TABLE"}, "';'"),
        ({"query": "what about AAPL | cat /etc/passwd"}, "'|'"),
        ({"symbol": "AAPL;DROP"}, "';'"),
        ({"symbol": "$AAPL"}, "'$'"),
        ({"query": "AAPL`id`"}, "'`'"),
    ],
)
def test_a_ticker_with_junk_is_422_naming_the_characters(
    gateway: tuple[str, str, Settings], body: dict[str, str], named: str
) -> None:
    resp = _post(gateway, body)
    assert resp.status_code == 422, resp.text
    detail = resp.json()["detail"]
    assert named in detail, detail
    if "symbol" in body:  # a field of its own: the 422 names it (a question is refused as a whole)
        assert [e["loc"] for e in resp.json()["errors"]] == [["body", "symbol"]], resp.json()
    else:
        assert set(resp.json()) == {"detail"}, resp.json()
    engine = get_engine(gateway[2].service.effective_database_url)
    assert repo.list_analyses(engine=engine, limit=10) == []  # nothing enqueued


def test_the_422_echoes_at_most_200_characters_of_the_input(gateway: tuple[str, str, Settings]) -> None:
    resp = _post(gateway, {"query": "A" * 990 + " ;"})
    assert resp.status_code == 422
    detail = resp.json()["detail"]
    assert "A" * 200 in detail and "A" * 201 not in detail and "';'" in detail


def test_a_question_is_not_junk(gateway: tuple[str, str, Settings]) -> None:
    # prose punctuation is not junk: refused because the embedded data lacks the company named
    resp = _post(gateway, {"query": "what's the P/E of AT&T?"})
    assert resp.status_code == 422
    assert "but the data source has no data for it" in resp.json()["detail"], resp.text


@pytest.mark.parametrize(
    ("query", "reason"),
    [
        ("is tesla a buy?", "names TSLA (Tesla, Inc.), but the data source has no data for it"),
        ("what about tesla?", "names TSLA (Tesla, Inc.), but the data source has no data for it"),
        ("apple or microsoft, which one?", "names several companies: AAPL (Apple Inc.), MSFT"),
    ],
)
def test_a_session_never_guesses_the_previous_ticker_for_a_company_it_cannot_use(
    gateway: tuple[str, str, Settings], query: str, reason: str
) -> None:
    # Given session s1 whose previous request was AAPL (the process-wide store of embedded mode)
    from core.tenancy import DEFAULT_TENANT
    from pipeline.sessions import session_store

    store = session_store(settings=gateway[2])
    previous = {"symbol": "AAPL", "analysis_type": "composite", "options": {}, "as_of": "2012-06-29"}
    store.put(f"{DEFAULT_TENANT}/s1", previous)
    # When the follow-up names a company the data source cannot serve, or two of them
    resp = _post(gateway, {"query": query, "session_id": "s1"})
    # Then 422 with the CLI's reason, nothing enqueued, and the session untouched
    assert resp.status_code == 422, resp.text
    assert reason in resp.json()["detail"], resp.json()
    engine = get_engine(gateway[2].service.effective_database_url)
    assert repo.list_analyses(engine=engine, limit=10) == []
    assert store.get(f"{DEFAULT_TENANT}/s1") == previous


def test_a_csp_request_for_spy_is_refused_for_the_symbol_not_the_type(
    gateway: tuple[str, str, Settings],
) -> None:
    # analysis_type "csp" is accepted; the embedded data has no SPY history, so the request is
    # refused with the reason (the CSV provider refuses it the same way), and nothing is enqueued
    resp = _post(gateway, {"symbol": "SPY", "analysis_type": "csp"})
    assert resp.status_code == 422, resp.text
    detail = resp.json()["detail"]
    assert "SPY" in detail and "analysis_type" not in detail
    engine = get_engine(gateway[2].service.effective_database_url)
    assert repo.list_analyses(engine=engine, limit=10) == []


def test_a_covered_call_request_takes_its_cost_basis_and_refuses_a_bad_one(
    gateway: tuple[str, str, Settings],
) -> None:
    # the type and its option pass the schema: SPY is then refused for its missing history
    resp = _post(gateway, {"symbol": "SPY", "analysis_type": "covered_call", "options": {"cost_basis": 600}})  # type: ignore[dict-item]
    assert resp.status_code == 422, resp.text
    assert "SPY" in resp.json()["detail"]
    # a cost basis that is no price is refused by the schema, naming the field
    resp = _post(gateway, {"symbol": "AAPL", "analysis_type": "covered_call", "options": {"cost_basis": -5}})  # type: ignore[dict-item]
    assert resp.status_code == 422 and "cost_basis" in resp.text
    engine = get_engine(gateway[2].service.effective_database_url)
    assert repo.list_analyses(engine=engine, limit=10) == []


def test_the_list_filters_by_plan_and_names_each_analysis_plan(gateway: tuple[str, str, Settings]) -> None:
    """``GET /analyses?type=`` keeps one plan and each item names its plan; a state written
    without a plan (the default one) counts as composite. Rows are made as a producer makes
    them (no worker runs here)."""
    import uuid
    from datetime import date

    from core.state import FinancialAgentState

    base, key, settings = gateway
    engine = get_engine(settings.service.effective_database_url)
    ids: dict[str, str] = {}
    for name, analysis_type in (("composite", None), ("csp", "csp"), ("covered_call", "covered_call")):
        state = FinancialAgentState(
            analysis_id=str(uuid.uuid4()),
            stock_symbol="AAPL",
            user_query="Analyze AAPL",
            as_of=date(2014, 6, 6),
            analysis_type=analysis_type,
        )
        assert ledger.create(
            engine=engine,
            analysis_id=state.analysis_id,
            symbol="AAPL",
            as_of=state.as_of,
            user_query=state.user_query,
            max_iterations=state.max_iterations,
            state=state.to_message(),
        )
        ids[name] = state.analysis_id

    def listed(**params: str) -> dict[str, str]:
        resp = httpx.get(f"{base}/analyses", params=params, headers={"X-API-Key": key}, timeout=60)
        assert resp.status_code == 200, resp.text
        return {item["analysis_id"]: item["analysis_type"] for item in resp.json()["items"]}

    assert listed() == {ids[name]: name for name in ids}
    assert listed(type="csp") == {ids["csp"]: "csp"}
    assert listed(type="composite") == {ids["composite"]: "composite"}
    assert listed(type="covered_call") == {ids["covered_call"]: "covered_call"}
    assert listed(type="sentiment") == {}
    one = httpx.get(f"{base}/analyses/{ids['covered_call']}", headers={"X-API-Key": key}, timeout=60)
    assert one.status_code == 200 and one.json()["analysis_type"] == "covered_call"
    bad = httpx.get(f"{base}/analyses", params={"type": "lottery"}, headers={"X-API-Key": key}, timeout=60)
    assert bad.status_code == 422 and "type" in bad.text
