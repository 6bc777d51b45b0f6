"""``POST /analyze`` refuses a ticker with junk with 422 ``{"detail": …}`` naming the characters
(the CLI's rule, ``pipeline.core.tickers.refuse_junk``), enqueues nothing, and echoes at most
200 characters of the input; a question with prose punctuation is not junk."""

from __future__ import annotations

import httpx
import pytest

from db import repo
from db.engine import get_engine
from pipeline.core.settings import Settings


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
    engine = get_engine(gateway[2].effective_database_url)
    assert repo.list_analyses(engine=engine, limit=10) == []  # nothing enqueued


def test_the_422_echoes_at_most_200_characters_of_the_input(gateway: tuple[str, str, Settings]) -> None:
    resp = _post(gateway, {"query": "A" * 990 + " ;"})
    assert resp.status_code == 422
    detail = resp.json()["detail"]
    assert "A" * 200 in detail and "A" * 201 not in detail and "';'" in detail


@pytest.mark.parametrize("query", ["what's the P/E of AT&T?", "is tesla a buy?"])
def test_a_question_is_not_junk(gateway: tuple[str, str, Settings], query: str) -> None:
    # the embedded data knows neither company: refused as unresolved, not as junk
    resp = _post(gateway, {"query": query})
    assert resp.status_code == 422
    assert resp.json()["detail"].startswith("no ticker in the request"), resp.text


def test_a_csp_request_for_spy_is_refused_for_the_symbol_not_the_type(
    gateway: tuple[str, str, Settings],
) -> None:
    # analysis_type "csp" is accepted; the embedded data has no SPY history, so the request is
    # refused with the reason (the CSV provider refuses it the same way), and nothing is enqueued
    resp = _post(gateway, {"symbol": "SPY", "analysis_type": "csp"})
    assert resp.status_code == 422, resp.text
    detail = resp.json()["detail"]
    assert "SPY" in detail and "analysis_type" not in detail
    engine = get_engine(gateway[2].effective_database_url)
    assert repo.list_analyses(engine=engine, limit=10) == []
