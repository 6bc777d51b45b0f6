"""No input gets a 5xx: the gateway on PostgreSQL, over real HTTP, refuses what it cannot store
or echo (NUL, lone surrogates), what JSON does not have or leaves ambiguous (NaN, 1e400,
repeated keys), dates outside the rule (0001-01-01, ``0``, the future for a run) and oversized
or unknown time zones, each with a 422 naming the field, and stores nothing. Unsupported
methods get 405 with every method of the path in ``Allow``; OPTIONS 204 with ``Allow``. The
OpenAPI document states the rules and the digest's media types."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import date
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from apps import watchlists
from apps.api.auth import create_key
from core.dates import DATE_PATTERN
from core.settings import Settings
from core.tenancy import SCOPES
from core.tickers import TICKER_PATTERN
from db.engine import get_engine
from tests.apps.api.conftest import serve_app
from tests.support.fuzz_hooks import DIGEST_RUN_DATE, DIGEST_WATCHLIST, seed_finished_run, stored_counts

TENANT = "inputs"
WATCHLIST = DIGEST_WATCHLIST  # with a finished run on DONE_RUN
DONE_RUN = DIGEST_RUN_DATE


@pytest.fixture(scope="module")
def gateway(pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[httpx.Client, Settings]]:
    """A client (key with every scope, tenant ``inputs``) of a gateway on the session's
    PostgreSQL database, with watchlist :data:`WATCHLIST` and a finished run of it on
    :data:`DONE_RUN`."""
    settings = Settings(
        service_database_url=pg_url,
        service_state_dir=tmp_path_factory.mktemp("inputs"),
        api_analyses_per_minute=100_000,
        api_max_in_flight=100_000,
    )
    key = create_key(name="inputs", tenant=TENANT, scopes=SCOPES, settings=settings)
    seed_finished_run(database_url=pg_url, tenant=TENANT)
    with (
        serve_app(settings) as base,
        httpx.Client(base_url=base, headers={"X-API-Key": key}, timeout=60) as client,
    ):
        yield client, settings


def _refused(
    gateway: tuple[httpx.Client, Settings], method: str, url: str, *, body: bytes | None = None
) -> dict[str, Any]:
    """Send the request; assert a 422 whose body is the gateway's error body and that no row
    was stored; return the body."""
    client, settings = gateway
    before = stored_counts(settings.service.effective_database_url)
    headers = {"Content-Type": "application/json"} if body is not None else {}
    response = client.request(method, url, content=body, headers=headers)
    assert response.status_code == 422, (method, url, body, response.status_code, response.text)
    payload = response.json()
    assert isinstance(payload["detail"], str) and payload["errors"], payload
    assert stored_counts(settings.service.effective_database_url) == before
    return payload


def _locs(payload: dict[str, Any]) -> list[list[Any]]:
    return [e["loc"] for e in payload["errors"]]


@pytest.mark.parametrize(
    ("method", "url", "body", "loc"),
    [
        ("GET", "/analyses/a%00b", None, ["path", "analysis_id"]),
        ("GET", "/analyses/a%00b/chart.png", None, ["path", "analysis_id"]),
        ("GET", "/analyses?symbol=AA%00", None, ["query", "symbol"]),
        ("GET", "/analyses?status=done%00", None, ["query", "status"]),
        ("GET", "/watchlists/w%00", None, ["path", "name"]),
        ("PATCH", "/watchlists/w%00", b'{"enabled": false}', ["path", "name"]),
        ("DELETE", "/watchlists/w%00", None, ["path", "name"]),
        ("POST", "/watchlists/w%00/runs", b"{}", ["path", "name"]),
        ("GET", "/watchlists/w%00/runs", None, ["path", "name"]),
        ("GET", f"/watchlists/{WATCHLIST}/runs/2013-02-28%00", None, ["path", "run_date"]),
        ("GET", "/watchlists/w%00/runs/2013-02-28/digest", None, ["path", "name"]),
        ("GET", "/scorecard?backtest=a%00", None, ["query", "backtest"]),
        ("GET", "/audit?limit=1%00", None, ["query", "limit"]),
        ("POST", "/analyze", b'{"query": "what about \\u0000 AAPL"}', ["body", "query"]),
        ("POST", "/watchlists", b'{"name": "n\\u0000", "tickers": ["AAPL"]}', ["body", "name"]),
    ],
)
def test_a_nul_character_anywhere_is_a_422_naming_the_field(
    gateway: tuple[httpx.Client, Settings], method: str, url: str, body: bytes | None, loc: list[str]
) -> None:
    payload = _refused(gateway, method, url, body=body)
    assert loc in _locs(payload), payload
    assert "NUL" in payload["detail"]


@pytest.mark.parametrize(
    ("url", "body", "loc"),
    [
        ("/analyze", b'{"symbol": "\\ud800"}', ["body", "symbol"]),
        ("/analyze", b'{"query": "\\ud800 what about AAPL"}', ["body", "query"]),
        ("/watchlists", b'{"name": "\\ud800", "tickers": ["AAPL"]}', ["body", "name"]),
        ("/watchlists", b'{"name": "ok", "tickers": ["AAPL", "\\udfff"]}', ["body", "tickers", 1]),
        ("/analyze", b'{"symbol": "AAPL", "\\ud800": 1}', ["body", "\\ud800"]),
    ],
)
def test_a_lone_surrogate_is_a_422_naming_the_field(
    gateway: tuple[httpx.Client, Settings], url: str, body: bytes, loc: list[Any]
) -> None:
    payload = _refused(gateway, "POST", url, body=body)
    assert loc in _locs(payload) and "surrogate" in payload["detail"], payload


@pytest.mark.parametrize("number", ["1e400", "-1e400", "NaN", "Infinity", "-Infinity", '"3"', "true", "3.5"])
@pytest.mark.parametrize("where", ["analyze", "watchlist"])
def test_max_iterations_must_be_a_finite_json_integer(
    gateway: tuple[httpx.Client, Settings], number: str, where: str
) -> None:
    options = '"options": {"max_iterations": ' + number + "}"
    if where == "analyze":
        url, body = "/analyze", '{"symbol": "AAPL", ' + options + "}"
    else:
        url, body = "/watchlists", '{"name": "mi", "tickers": ["AAPL"], ' + options + "}"
    payload = _refused(gateway, "POST", url, body=body.encode())
    assert ["body", "options", "max_iterations"] in _locs(payload), payload


def test_a_repeated_json_key_is_refused_not_resolved_to_the_last(
    gateway: tuple[httpx.Client, Settings],
) -> None:
    payload = _refused(gateway, "POST", "/analyze", body=b'{"symbol": "AAPL;DROP TABLE x", "symbol": "IBM"}')
    assert _locs(payload) == [["body", "symbol"]] and "more than once" in payload["detail"]
    payload = _refused(
        gateway,
        "POST",
        f"/watchlists/{WATCHLIST}/runs",
        body=b'{"run_date": "2013-02-28", "run_date": "2013-02-27"}',
    )
    assert _locs(payload) == [["body", "run_date"]]


def test_a_repeated_query_parameter_is_refused(gateway: tuple[httpx.Client, Settings]) -> None:
    payload = _refused(gateway, "GET", "/analyses?symbol=AAPL&symbol=IBM")
    assert _locs(payload) == [["query", "symbol"]] and "2 times" in payload["detail"]


@pytest.mark.parametrize(
    ("method", "url", "body", "loc"),
    [
        ("POST", "/analyze", b'{"symbol": "AAPL", "as_of": "0001-01-01"}', ["body", "as_of"]),
        ("POST", "/analyze", b'{"symbol": "AAPL", "as_of": 0}', ["body", "as_of"]),
        ("POST", "/analyze", b'{"symbol": "AAPL", "as_of": "2012-06-29T00:00:00"}', ["body", "as_of"]),
        ("POST", f"/watchlists/{WATCHLIST}/runs", b'{"run_date": "0001-01-01"}', ["body", "run_date"]),
        ("POST", f"/watchlists/{WATCHLIST}/runs", b'{"run_date": 0}', ["body", "run_date"]),
        ("POST", f"/watchlists/{WATCHLIST}/runs", b'{"run_date": "20130228"}', ["body", "run_date"]),
        ("GET", f"/watchlists/{WATCHLIST}/runs/0001-01-01", None, ["path", "run_date"]),
        ("GET", f"/watchlists/{WATCHLIST}/runs/0", None, ["path", "run_date"]),
        ("GET", "/scorecard?since=0", None, ["query", "since"]),
        ("GET", "/scorecard?since=1899-12-31", None, ["query", "since"]),
    ],
)
def test_dates_outside_the_rule_are_a_422_naming_the_field(
    gateway: tuple[httpx.Client, Settings], method: str, url: str, body: bytes | None, loc: list[str]
) -> None:
    payload = _refused(gateway, method, url, body=body)
    assert loc in _locs(payload) and "YYYY-MM-DD" in payload["detail"], payload


def _runs(settings: Settings) -> list[date]:
    with get_engine(settings.service.effective_database_url).connect() as conn:
        return sorted(conn.execute(sa.text("SELECT run_date FROM watchlist_runs")).scalars())


@pytest.mark.parametrize("run_date", ["9999-12-31", "2999-01-01"])
def test_a_run_for_a_future_date_is_refused_like_a_future_analysis(
    gateway: tuple[httpx.Client, Settings], run_date: str
) -> None:
    client, settings = gateway
    runs = _runs(settings)
    response = client.post(f"/watchlists/{WATCHLIST}/runs", json={"run_date": run_date})
    assert response.status_code == 422, response.text
    assert re.fullmatch(
        rf"run_date {run_date} is in the future \(today is .* America/New_York\)", response.json()["detail"]
    )
    assert _runs(settings) == runs  # no watchlist_runs row, not even an empty one
    response = client.post("/analyze", json={"symbol": "AAPL", "as_of": run_date})
    assert response.status_code == 422 and "in the future" in response.json()["detail"]


def test_a_future_date_selects_nothing_where_a_date_only_selects(
    gateway: tuple[httpx.Client, Settings],
) -> None:
    client, _ = gateway
    assert client.get(f"/watchlists/{WATCHLIST}/runs/2999-01-01").status_code == 404
    response = client.get("/scorecard", params={"since": "2999-01-01"})
    assert response.status_code == 200 and response.json()["recommendations"] == 0


@pytest.mark.parametrize(
    ("zone", "shown"),
    [("A" * 100_000, "A" * 80 + "…"), ("Mars/Olympus", "Mars/Olympus"), ("localtime", "localtime")],
)
def test_an_unknown_or_huge_time_zone_is_a_422_not_a_503(
    gateway: tuple[httpx.Client, Settings], zone: str, shown: str
) -> None:
    body = json.dumps({"name": "tz", "tickers": ["AAPL"], "timezone": zone}).encode()
    payload = _refused(gateway, "POST", "/watchlists", body=body)
    assert ["body", "timezone"] in _locs(payload) and repr(shown) in payload["detail"], payload["detail"][
        :300
    ]
    assert len(json.dumps(payload)) < 2_000
    payload = _refused(
        gateway, "PATCH", f"/watchlists/{WATCHLIST}", body=json.dumps({"timezone": zone}).encode()
    )
    assert ["body", "timezone"] in _locs(payload)


@pytest.mark.parametrize(
    ("body", "loc"),
    [
        ({"name": "sc", "tickers": ["AAPL"], "schedule": "-1 * * * *"}, ["body", "schedule"]),
        ({"name": "sc", "tickers": ["AAPL"], "schedule": "0,,1 * * * *"}, ["body", "schedule"]),
        ({"name": "sc", "tickers": [" aapl"]}, ["body", "tickers", 0]),
        ({"name": "-sc", "tickers": ["AAPL"]}, ["body", "name"]),
        (
            {"name": "sc", "tickers": ["AAPL"], "options": {"as_of": "yesterday"}},
            ["body", "options", "as_of"],
        ),
        ({"name": "sc", "tickers": ["AAPL"], "options": {"colour": "red"}}, ["body", "options", "colour"]),
    ],
)
def test_watchlist_fields_follow_their_stated_rules(
    gateway: tuple[httpx.Client, Settings], body: dict[str, Any], loc: list[Any]
) -> None:
    payload = _refused(gateway, "POST", "/watchlists", body=json.dumps(body).encode())
    assert loc in _locs(payload), payload


def test_enabled_must_be_a_json_boolean(gateway: tuple[httpx.Client, Settings]) -> None:
    payload = _refused(gateway, "PATCH", f"/watchlists/{WATCHLIST}", body=b'{"enabled": "false"}')
    assert ["body", "enabled"] in _locs(payload)


@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [
        ("PUT", "/analyze", "POST"),
        ("DELETE", "/watchlists", "GET, POST"),
        ("POST", f"/watchlists/{WATCHLIST}", "DELETE, GET, PATCH"),
        ("DELETE", f"/watchlists/{WATCHLIST}/runs", "GET, POST"),
        ("POST", "/analyses/00000000-0000-0000-0000-000000000000", "GET"),
    ],
)
def test_an_unsupported_method_is_405_allowing_every_method_of_the_path(
    gateway: tuple[httpx.Client, Settings], method: str, path: str, allow: str
) -> None:
    client, _ = gateway
    response = client.request(method, path)
    assert response.status_code == 405, response.text
    assert response.headers["Allow"] == allow
    assert response.json()["detail"] == f"method {method} is not allowed here; allowed: {allow}"
    options = client.options(path)
    assert options.status_code == 204 and options.content == b""
    assert options.headers["Allow"] == ", ".join(sorted({*allow.split(", "), "OPTIONS"}))


def test_options_on_an_unknown_path_is_404(gateway: tuple[httpx.Client, Settings]) -> None:
    assert gateway[0].options("/nowhere").status_code == 404


def test_the_digest_answers_each_documented_media_type(gateway: tuple[httpx.Client, Settings]) -> None:
    client, _ = gateway
    url = f"/watchlists/{WATCHLIST}/runs/{DONE_RUN.isoformat()}/digest"
    documented = client.get("/openapi.json").json()["paths"]["/watchlists/{name}/runs/{run_date}/digest"]
    media = documented["get"]["responses"]["200"]["content"]
    assert set(media) == {"text/html", "text/markdown", "application/json"}
    for fmt, expected in (("html", "text/html"), ("markdown", "text/markdown"), ("json", "application/json")):
        response = client.get(url, params={"format": fmt})
        assert response.status_code == 200
        assert response.headers["content-type"].split(";")[0] == expected
    assert client.get(url).headers["content-type"].startswith("text/html")


def _schema(document: dict[str, Any], ref_or_schema: dict[str, Any]) -> dict[str, Any]:
    if "$ref" in ref_or_schema:
        return document["components"]["schemas"][ref_or_schema["$ref"].rsplit("/", 1)[1]]
    return ref_or_schema


def _non_null(schema: dict[str, Any]) -> dict[str, Any]:
    options = [s for s in schema.get("anyOf", [schema]) if s.get("type") != "null"]
    assert len(options) == 1, schema
    return options[0]


def test_the_openapi_document_states_the_input_rules(gateway: tuple[httpx.Client, Settings]) -> None:
    client, _ = gateway
    document = client.get("/openapi.json").json()
    schemas = document["components"]["schemas"]
    watchlist_in = schemas["WatchlistIn"]["properties"]
    assert watchlist_in["name"]["pattern"] == watchlists.NAME_PATTERN
    assert watchlist_in["tickers"]["items"]["pattern"] == TICKER_PATTERN
    assert _non_null(watchlist_in["schedule"])["pattern"] == watchlists.SCHEDULE_PATTERN
    assert _non_null(watchlist_in["timezone"])["enum"] == list(watchlists.TIME_ZONES)
    options = _schema(document, _non_null(watchlist_in["options"]))["properties"]
    assert _non_null(options["max_iterations"]) == {"type": "integer", "minimum": 1, "maximum": 10}
    analyze = schemas["AnalyzeRequest"]
    assert _non_null(analyze["properties"]["symbol"])["pattern"] == TICKER_PATTERN
    assert _non_null(analyze["properties"]["as_of"])["pattern"] == DATE_PATTERN
    assert [branch["required"] for branch in analyze["anyOf"]] == [["symbol"], ["query"], ["session_id"]]
    run_request = schemas["RunRequest"]["properties"]["run_date"]
    assert _non_null(run_request)["pattern"] == DATE_PATTERN

    def parameter(path: str, name: str) -> dict[str, Any]:
        (op,) = (
            document["paths"][path].values()
            if len(document["paths"][path]) == 1
            else [document["paths"][path]["get"]]
        )
        return next(p for p in op["parameters"] if p["name"] == name)["schema"]

    assert parameter("/watchlists/{name}", "name")["pattern"] == watchlists.NAME_PATTERN
    assert parameter("/watchlists/{name}/runs/{run_date}", "run_date")["pattern"] == DATE_PATTERN
    assert parameter("/analyses/{analysis_id}", "analysis_id")["format"] == "uuid"
    assert _non_null(parameter("/analyses", "symbol"))["pattern"] == TICKER_PATTERN
    assert _non_null(parameter("/scorecard", "since"))["pattern"] == DATE_PATTERN
    assert _non_null(parameter("/scorecard", "backtest"))["pattern"] == watchlists.NAME_PATTERN


def test_the_fuzz_runs_refusal_check_fails_when_a_refused_request_stored_a_row(
    gateway: tuple[httpx.Client, Settings], monkeypatch: pytest.MonkeyPatch
) -> None:
    # the check of tests/support/fuzz_hooks.py, on a 422 that (as a bug would) left a row behind
    from tests.support import fuzz_hooks

    _, settings = gateway
    monkeypatch.setenv("FINAGENT_SERVICE_DATABASE_URL", settings.service.effective_database_url)
    monkeypatch.setenv("FINAGENT_FUZZ_API_KEY", "unused")
    case = SimpleNamespace(
        id="case-1", method="POST", path_parameters={}, operation=SimpleNamespace(path="/watchlists")
    )
    fuzz_hooks.before_call(None, case, {})
    watchlists.create_watchlist(name="left-behind", tickers=["AAPL"], settings=settings, tenant=TENANT)
    with pytest.raises(AssertionError, match=r"a 422 answer stored rows .*'watchlists': \(\d+, \d+\)"):
        fuzz_hooks.refusal_stores_nothing(None, SimpleNamespace(status_code=422), case)
    fuzz_hooks.before_call(None, case, {})
    watchlists.delete_watchlist(name="left-behind", settings=settings, tenant=TENANT)
    assert fuzz_hooks.refusal_stores_nothing(None, SimpleNamespace(status_code=201), case) is None


def test_the_html_digest_is_sent_with_the_consoles_page_headers(
    gateway: tuple[httpx.Client, Settings],
) -> None:
    from apps.api.console.views import PAGE_HEADERS

    client, _ = gateway
    page = client.get(f"/watchlists/{WATCHLIST}/runs/{DONE_RUN.isoformat()}/digest")
    assert page.status_code == 200
    csp = page.headers["content-security-policy"]
    assert csp == PAGE_HEADERS["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp and "img-src 'self'" in csp
    assert page.headers["x-frame-options"] == "DENY" and page.headers["cache-control"] == "no-store"
