"""The console's session rules over real HTTP (uvicorn, SQLite; no browser): the cookie's
attributes, a forged or edited cookie, a revoked key, the CSRF token, the ``next`` target, the
``read`` scope, and that the console stays out of the OpenAPI document. The browser flows are
``tests/integration/test_console_browser.py``."""

from __future__ import annotations

import base64
import json
import re
from datetime import date

import httpx
import pytest
import sqlalchemy as sa

from apps.api.auth import create_key
from apps.api.console.session import console_secret
from core.settings import Settings, get_settings
from db import console_sessions_repo, ops_repo
from db.engine import get_engine


def _client(base: str, timeout: float = 30) -> httpx.Client:
    """A client that sends the console's own ``Origin``, as a browser does with every POST."""
    return httpx.Client(base_url=base, timeout=timeout, headers={"Origin": base})


def _csrf(html: str) -> str:
    match = re.search(r'name="csrf" value="([^"]+)"', html)
    assert match, html
    return match.group(1)


def _sign_in(client: httpx.Client, key: str, next_path: str = "/console/analyses") -> httpx.Response:
    token = _csrf(client.get("/console/login").text)
    return client.post("/console/login", data={"api_key": key, "csrf": token, "next": next_path})


def test_sign_in_sets_a_signed_http_only_cookie_without_the_key(gateway: tuple[str, str, Settings]) -> None:
    base, key, _ = gateway
    with _client(base) as client:
        answer = _sign_in(client, key)
        assert answer.status_code == 303 and answer.headers["location"] == "/console/analyses"
        cookie = answer.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=lax" in cookie and "Path=/console" in cookie
        assert key not in cookie and key.split("_")[2] not in cookie
        page = client.get("/console/analyses")
        assert page.status_code == 200
        # signed in, the sign-in page goes on to the console
        assert client.get("/console/login").headers["location"] == "/console/analyses"
        # no framing, no foreign scripts, no caching of the tenant's page
        csp = page.headers["content-security-policy"]
        assert "frame-ancestors 'none'" in csp and "script-src 'self'" in csp
        assert page.headers["x-frame-options"] == "DENY" and page.headers["cache-control"] == "no-store"


def test_a_forged_or_edited_cookie_is_no_session(gateway: tuple[str, str, Settings]) -> None:
    base, key, _ = gateway
    with _client(base) as client:
        _sign_in(client, key)
        value = client.cookies["finagent_console"]
        payload, stamp, signature = value.split(".")
        edited = payload[:-2] + ("AA" if payload[-2:] != "AA" else "BB")
        for bad in (f"{edited}.{stamp}.{signature}", f"{payload}.{stamp}.{'x' * len(signature)}"):
            client.cookies.set("finagent_console", bad, path="/console")
            answer = client.get("/console/analyses")
            assert answer.status_code == 303
            assert answer.headers["location"] == "/console/login?next=%2Fconsole%2Fanalyses"


def test_a_revoked_key_ends_its_sessions(gateway: tuple[str, str, Settings]) -> None:
    base, key, settings = gateway
    with _client(base) as client:
        _sign_in(client, key)
        assert client.get("/console/analyses").status_code == 200
        ops_repo.revoke_api_key(engine=get_engine(settings.service.effective_database_url), name="limits")
        assert client.get("/console/analyses").status_code == 303


def _new_analysis_post(client: httpx.Client, csrf: str) -> httpx.Response:
    return client.post("/console/analyses", data={"csrf": csrf, "symbol": "AAPL", "idempotency_key": "k1"})


def _copy(base: str, client: httpx.Client) -> httpx.Client:
    """A second client holding a copy of ``client``'s session cookie (someone who copied it)."""
    thief = _client(base)
    thief.cookies.set("finagent_console", client.cookies["finagent_console"], path="/console")
    return thief


def test_a_cookie_copied_before_sign_out_is_refused_after_it(gateway: tuple[str, str, Settings]) -> None:
    base, key, _ = gateway
    with _client(base) as client:
        _sign_in(client, key)
        page = client.get("/console/new")
        csrf = _csrf(page.text)
        with _copy(base, client) as thief:
            assert thief.get("/console/analyses").status_code == 200  # the copy works while signed in
            # when the user signs out
            assert client.post("/console/logout", data={"csrf": csrf}).status_code == 303
            # then the copy reads no page (sign-in instead) and posts no form (403)
            answer = thief.get("/console/analyses")
            assert answer.status_code == 303 and answer.headers["location"].startswith("/console/login")
            refused = _new_analysis_post(thief, csrf)
            assert refused.status_code == 403 and "session has ended" in refused.text
        # and the one who signed out is signed out too
        assert client.get("/console/analyses").status_code == 303


def test_a_cookie_copied_before_the_keys_revocation_is_refused_after_it(
    gateway: tuple[str, str, Settings],
) -> None:
    base, key, settings = gateway
    engine = get_engine(settings.service.effective_database_url)
    with _client(base) as client:
        _sign_in(client, key)
        csrf = _csrf(client.get("/console/new").text)
        key_id = key.split("_")[1]
        assert console_sessions_repo.count_for_key(engine=engine, key_id=key_id) == 1
        with _copy(base, client) as thief:
            ops_repo.revoke_api_key(engine=engine, name="limits")
            # the revocation deleted the key's sessions in its own transaction
            assert console_sessions_repo.count_for_key(engine=engine, key_id=key_id) == 0
            assert thief.get("/console/analyses").status_code == 303
            assert _new_analysis_post(thief, csrf).status_code == 403


def test_a_change_of_the_keys_scopes_ends_its_sessions(gateway: tuple[str, str, Settings]) -> None:
    base, key, settings = gateway
    engine = get_engine(settings.service.effective_database_url)
    with _client(base) as client:
        _sign_in(client, key)
        assert client.get("/console/analyses").status_code == 200
        # the operator takes a scope away (or adds one): the session signed in under others ends
        with engine.begin() as conn:
            conn.execute(sa.text("UPDATE api_keys SET scopes = 'read' WHERE name = 'limits'"))
        assert client.get("/console/analyses").status_code == 303
        _sign_in(client, key)  # signing in again takes the key as it is now
        assert client.get("/console/analyses").status_code == 200


def test_an_idle_session_ends_after_the_idle_timeout(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from datetime import timedelta

    from db._sql import utc_now
    from db.migrate import upgrade

    url = f"sqlite:///{tmp_path / 'idle.sqlite3'}"
    upgrade(url=url)
    settings = Settings(service_database_url=url, service_state_dir=tmp_path)
    key = create_key(name="idle", settings=settings)
    engine = get_engine(url)
    start = utc_now()
    console_sessions_repo.create(
        engine=engine, session_id="s1", key_id=key.split("_")[1], scopes="read,analyze,watchlists",
        csrf="c", ttl_seconds=8 * 3600, now=start,
    )  # fmt: skip
    # used every 20 minutes it lives on (each use restarts the idle clock) ...
    for minutes in (20, 40, 60):
        found = console_sessions_repo.live(
            engine=engine, session_id="s1", idle_seconds=1800, now=start + timedelta(minutes=minutes)
        )
        assert found is not None
    # ... left alone for more than 30 minutes it is over, and stays over
    late = start + timedelta(minutes=91)
    assert console_sessions_repo.live(engine=engine, session_id="s1", idle_seconds=1800, now=late) is None
    assert console_sessions_repo.live(engine=engine, session_id="s1", idle_seconds=1800, now=start) is None
    # and a session never outlives its absolute lifetime, however busy
    console_sessions_repo.create(
        engine=engine, session_id="s2", key_id=key.split("_")[1], scopes="read,analyze,watchlists",
        csrf="c", ttl_seconds=3600, now=start,
    )  # fmt: skip
    at = start
    for _ in range(5):  # 10 ... 50 minutes
        at += timedelta(minutes=10)
        assert console_sessions_repo.live(engine=engine, session_id="s2", idle_seconds=1800, now=at)
    assert (
        console_sessions_repo.live(
            engine=engine, session_id="s2", idle_seconds=1800, now=start + timedelta(minutes=61)
        )
        is None
    )


def test_the_session_row_holds_no_session_id(gateway: tuple[str, str, Settings]) -> None:
    base, key, settings = gateway
    with _client(base) as client:
        _sign_in(client, key)
        with get_engine(settings.service.effective_database_url).connect() as conn:
            rows = conn.execute(sa.text("SELECT id_hash, csrf FROM console_sessions")).all()
        cookie = client.cookies["finagent_console"]
        payload = json.loads(base64.urlsafe_b64decode(cookie.split(".")[0] + "=="))
        assert len(rows) == 1 and rows[0][0] != payload["s"] and len(rows[0][0]) == 64
        assert set(payload) == {"s"}  # neither the key's id nor the CSRF token travel in it


@pytest.mark.parametrize(
    ("headers", "accepted"),
    [
        ({"Origin": "https://evil.example"}, False),
        ({"Origin": "http://127.0.0.1:1"}, False),  # another port is another origin
        ({"Origin": "null"}, False),  # a sandboxed frame or a file: page
        ({"Origin": "", "Referer": "https://evil.example/page"}, False),
        ({"Origin": ""}, False),  # neither header: refused
        ({"Origin": "", "Referer": "SELF/console/new"}, True),
        ({"Origin": "https://console.example.com"}, True),  # configured as allowed
    ],
    ids=["foreign", "other-port", "null", "foreign-referer", "none", "own-referer", "allowed"],
)
def test_console_posts_must_come_from_the_consoles_origin(
    make_gateway, headers: dict[str, str], accepted: bool
) -> None:  # type: ignore[no-untyped-def]
    base, settings = make_gateway(api_console_allowed_origins="https://console.example.com/")
    key = create_key(name="origin", settings=settings)
    with _client(base) as client:
        _sign_in(client, key)
        csrf = _csrf(client.get("/console/new").text)
        sent = {k: v.replace("SELF", base) for k, v in headers.items() if v}
        client.headers.pop("Origin")
        answer = client.post(
            "/console/watchlists", data={"csrf": csrf, "name": "o", "tickers": "AAPL"}, headers=sent
        )
        if accepted:
            assert answer.status_code == 303, answer.text
        else:
            assert answer.status_code == 403, answer.text
            assert "another site" in answer.text or "without Origin or Referer" in answer.text
            # nothing was made
            assert httpx.get(f"{base}/watchlists/o", headers={"X-API-Key": key}).status_code == 404


def test_posts_without_the_sessions_csrf_token_are_refused(gateway: tuple[str, str, Settings]) -> None:
    base, key, _ = gateway
    with _client(base) as client:
        # sign-in itself: no token, or one from another session
        assert client.post("/console/login", data={"api_key": key}).status_code == 403
        with _client(base) as other:
            foreign = _csrf(other.get("/console/login").text)
        client.get("/console/login")
        assert client.post("/console/login", data={"api_key": key, "csrf": foreign}).status_code == 403
        _sign_in(client, key)
        for data in ({"symbol": "AAPL"}, {"symbol": "AAPL", "csrf": foreign}):
            assert client.post("/console/analyses", data=data).status_code == 403
        assert client.post("/console/logout", data={}).status_code == 403
        assert client.get("/console/analyses").status_code == 200  # still signed in


@pytest.mark.parametrize("target", ["//evil.example/x", "https://evil.example/", "/docs", "/console\\..\\x"])
def test_sign_in_never_redirects_off_the_console(gateway: tuple[str, str, Settings], target: str) -> None:
    base, key, _ = gateway
    with _client(base) as client:
        assert _sign_in(client, key, target).headers["location"] == "/console/analyses"


def test_a_key_without_read_cannot_sign_in(gateway: tuple[str, str, Settings]) -> None:
    base, _, settings = gateway
    admin_only = create_key(name="only-admin", settings=settings, scopes=("admin",))
    with _client(base) as client:
        answer = _sign_in(client, admin_only)
        assert answer.status_code == 403 and "lacks the &#39;read&#39; scope" in answer.text


def test_wrong_keys_spend_the_failed_authentication_allowance(make_gateway) -> None:  # type: ignore[no-untyped-def]
    base, _ = make_gateway(api_failed_auth_per_minute=2)
    with _client(base) as client:
        codes = [_sign_in(client, "fa_000000000000_" + "x" * 43).status_code for _ in range(3)]
    assert codes == [403, 403, 429]


def test_the_console_is_not_in_the_openapi_document(gateway: tuple[str, str, Settings]) -> None:
    base, _, _ = gateway
    paths = httpx.get(f"{base}/openapi.json", timeout=30).json()["paths"]
    assert not [p for p in paths if p.startswith("/console")]


def test_a_short_console_secret_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 32"):
        console_secret(Settings(api_console_secret="short"))
    assert console_secret(Settings(api_console_secret="s" * 32)) == "s" * 32
    assert console_secret(Settings()) != console_secret(Settings())  # random per process


def _form(client: httpx.Client) -> dict[str, str]:
    html = client.get("/console/new").text
    key = re.search(r'name="idempotency_key" value="([^"]+)"', html)
    assert key, html
    return {"csrf": _csrf(html), "idempotency_key": key.group(1)}


def test_a_new_analysis_goes_through_post_analyze(
    clean_settings: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # an embedded gateway whose keys may start one analysis a minute
    from pipeline import service
    from pipeline.producer import stop_embedded_worker
    from tests.apps.api.conftest import serve_app

    monkeypatch.setenv("FINAGENT_API_ANALYSES_PER_MINUTE", "1")
    get_settings.cache_clear()
    settings = get_settings()
    service.prepare_database(settings=settings)
    key = create_key(name="console-user", settings=settings)
    try:
        with serve_app(settings, lifespan="on") as base, _client(base) as client:
            _sign_in(client, key)
            form = {**_form(client), "symbol": "AAPL", "as_of": "2012-06-29"}
            first = client.post("/console/analyses", data=form)
            assert first.status_code == 303
            location = first.headers["location"]
            assert re.fullmatch(r"/console/analyses/[0-9a-f-]{36}", location), location
            # the same form again (a double click, a reload): the same analysis, no token spent
            again = client.post("/console/analyses", data=form)
            assert again.status_code == 303 and again.headers["location"] == location
            # another analysis: the minute's one token is spent, so the form says why
            refused = client.post("/console/analyses", data={**_form(client), "symbol": "MSFT"})
            assert refused.status_code == 429 and "retry in" in refused.text
            assert client.get(location).status_code == 200
    finally:
        stop_embedded_worker()
    engine = get_engine(settings.service.effective_database_url)
    posts = [r for r in ops_repo.list_audit(engine=engine) if r["what"].endswith("/console/analyses")]
    assert len(posts) == 3, posts
    assert {r["api_key_id"] for r in posts} == {key.split("_")[1]}
    assert sorted(r["status_code"] for r in posts) == [303, 303, 429]
    assert {r["object_id"] for r in posts if r["status_code"] == 303} == {location.rsplit("/", 1)[1]}


def test_the_timeline_merges_tool_and_llm_calls_by_time() -> None:
    from datetime import UTC, datetime

    from apps.api.console.views import timeline

    def at(second: int) -> datetime:
        return datetime(2026, 1, 2, 3, 4, second, tzinfo=UTC)

    tool = {
        "stage": "research",
        "tool": "get_history",
        "result_summary": "",
        "error": None,
        "error_code": None,
    }
    tools = [
        {**tool, "tool_call_id": "get_history_1", "timestamp": at(1), "status": "error", "attempt": 1,
         "latency_ms": 12.5, "error_code": "TIMEOUT", "error": "provider timed out"},
        {**tool, "tool_call_id": "get_history_1", "timestamp": at(3), "status": "success", "attempt": 2,
         "latency_ms": 8.0, "result_summary": "507 bars"},
    ]  # fmt: skip
    llms = [
        {"llm_call_id": "llm_1", "timestamp": at(2), "stage": "analysis", "agent": "technical",
         "model": "m", "status": "success", "attempt": 1, "latency_ms": 900.0, "prompt_tokens": 1200,
         "completion_tokens": 34, "cost_usd": None, "finish_reason": "stop", "error": None},
    ]  # fmt: skip
    events = timeline(tools, llms)
    assert [(e["kind"], e["attempt"]) for e in events] == [("tool", 1), ("llm", 1), ("tool", 2)]
    # the citation target is the tool call's first attempt only
    assert [e["anchor"] for e in events] == ["call-get_history_1", None, None]
    assert events[0]["error"] == "TIMEOUT provider timed out" and events[2]["error"] is None
    assert events[1]["tokens"] == 1234 and events[0]["tokens"] is None


def _create_form(client: httpx.Client, **fields: str) -> httpx.Response:
    token = _csrf(client.get("/console/watchlists").text)
    return client.post("/console/watchlists", data={"csrf": token, **fields})


def test_a_watchlist_is_created_edited_and_deleted_from_the_console(
    gateway: tuple[str, str, Settings],
) -> None:
    base, key, _ = gateway
    with _client(base) as client:
        _sign_in(client, key)
        made = _create_form(client, name="tech", tickers="aapl, MSFT aapl", schedule="0 22 * * 1-5")
        assert made.status_code == 303 and made.headers["location"] == "/console/watchlists/tech"
        api = httpx.get(f"{base}/watchlists/tech", headers={"X-API-Key": key}).json()
        assert api["tickers"] == ["AAPL", "MSFT"] and api["schedule"] == "0 22 * * 1-5"
        assert api["timezone"] == "America/New_York"  # the default
        page = client.get("/console/watchlists/tech/edit")
        assert page.status_code == 200 and "AAPL, MSFT" in page.text
        edited = client.post(
            "/console/watchlists/tech/edit",
            data={"csrf": _csrf(page.text), "tickers": "NVDA", "schedule": "15 8 * * *",
                  "timezone": "Europe/London", "max_iterations": "2", "as_of": "latest"},
        )  # fmt: skip
        assert edited.status_code == 303
        api = httpx.get(f"{base}/watchlists/tech", headers={"X-API-Key": key}).json()
        # the checkbox was left unticked: the watchlist is disabled
        assert (api["tickers"], api["schedule"], api["timezone"], api["enabled"]) == (
            ["NVDA"],
            "15 8 * * *",
            "Europe/London",
            False,
        )
        assert api["options"] == {"max_iterations": 2, "as_of": "latest"}
        token = _csrf(client.get("/console/watchlists/tech").text)
        gone = client.post("/console/watchlists/tech/delete", data={"csrf": token})
        assert gone.status_code == 303 and gone.headers["location"] == "/console/watchlists"
        assert httpx.get(f"{base}/watchlists/tech", headers={"X-API-Key": key}).status_code == 404
        assert client.get("/console/watchlists/tech").status_code == 404


def test_the_watchlist_forms_show_the_apis_validation_errors(gateway: tuple[str, str, Settings]) -> None:
    base, key, _ = gateway
    with _client(base) as client:
        _sign_in(client, key)
        bad_cron = _create_form(client, name="tech", tickers="AAPL", schedule="61 * * * *")
        assert bad_cron.status_code == 422 and "schedule" in bad_cron.text and 'role="alert"' in bad_cron.text
        # what was typed comes back in the form
        assert 'value="61 * * * *"' in bad_cron.text
        assert _create_form(client, name="-x", tickers="AAPL").status_code == 422
        assert _create_form(client, name="tech", tickers="").status_code == 422
        assert _create_form(client, name="tech", tickers="AAPL", timezone="Mars/Olympus").status_code == 422
        assert _create_form(client, name="tech", tickers="AAPL", max_iterations="11").status_code == 422
        assert httpx.get(f"{base}/watchlists", headers={"X-API-Key": key}).json() == []  # nothing stored
        assert _create_form(client, name="tech", tickers="AAPL").status_code == 303
        taken = _create_form(client, name="tech", tickers="MSFT")
        assert taken.status_code == 409 and "tech" in taken.text
        page = client.get("/console/watchlists/tech/edit").text
        edit = {
            "csrf": _csrf(page),
            "tickers": "AAPL",
            "schedule": "* * *",
            "timezone": "UTC",
            "enabled": "on",
        }
        refused = client.post("/console/watchlists/tech/edit", data=edit)
        assert refused.status_code == 422 and "schedule" in refused.text
        # a run date in the future is refused before anything is stored or enqueued
        run = client.post(
            "/console/watchlists/tech/runs", data={"csrf": edit["csrf"], "run_date": "2999-01-01"}
        )
        assert run.status_code == 422 and "The run was not started" in run.text
        assert httpx.get(f"{base}/watchlists/tech/runs", headers={"X-API-Key": key}).json() == []


def test_the_watchlist_forms_refuse_without_csrf_and_hide_other_tenants(
    gateway: tuple[str, str, Settings],
) -> None:
    base, key, settings = gateway
    other = create_key(name="other", settings=settings, tenant="other")
    made = httpx.post(
        f"{base}/watchlists", json={"name": "theirs", "tickers": ["AAPL"]}, headers={"X-API-Key": other}
    )
    assert made.status_code == 201
    with _client(base) as client:
        _sign_in(client, key)
        token = _csrf(client.get("/console/watchlists").text)
        assert _create_form(client, name="mine", tickers="AAPL").status_code == 303
        for path, data in [
            ("/console/watchlists", {"name": "x", "tickers": "AAPL"}),
            ("/console/watchlists/mine/edit", {"tickers": "MSFT"}),
            ("/console/watchlists/mine/delete", {}),
            ("/console/watchlists/mine/runs", {}),
        ]:
            assert client.post(path, data=data).status_code == 403, path
            assert client.post(path, data={**data, "csrf": "not-the-token"}).status_code == 403, path
        assert httpx.get(f"{base}/watchlists/mine", headers={"X-API-Key": key}).json()["tickers"] == ["AAPL"]
        # another tenant's watchlist: a 404 page for every form, the same as an unknown one
        for name in ("theirs", "unknown"):
            assert client.get(f"/console/watchlists/{name}/edit").status_code == 404
            for action, data in [("edit", {"tickers": "MSFT"}), ("delete", {}), ("runs", {})]:
                answer = client.post(f"/console/watchlists/{name}/{action}", data={"csrf": token, **data})
                assert answer.status_code == 404, (name, action)
    assert httpx.get(f"{base}/watchlists/theirs", headers={"X-API-Key": other}).json()["tickers"] == ["AAPL"]


def test_a_key_without_the_watchlists_scope_gets_a_403_on_the_form(
    gateway: tuple[str, str, Settings],
) -> None:
    base, _, settings = gateway
    reader = create_key(name="reader", settings=settings, scopes=("read",))
    with _client(base) as client:
        _sign_in(client, reader)
        answer = _create_form(client, name="tech", tickers="AAPL")
        assert answer.status_code == 403 and "watchlists" in answer.text


def _with_risk(settings: Settings, *, analysis_id: str, as_of: date) -> None:
    """Store the report's ``risk`` object of the risk forecast of AAPL at ``as_of`` (the
    ``risk_forecast`` tool on the embedded data) in ``analysis_id``'s row."""
    from agents.data.market.embedded import EmbeddedProvider
    from agents.tools.catalog import run_tool
    from agents.tools.registry import ToolContext
    from db.engine import get_engine
    from db.repo import ANALYSES

    ctx = ToolContext(settings=settings, as_of=as_of, provider=EmbeddedProvider())
    env = run_tool(name="risk_forecast", arguments={"symbol": "AAPL"}, ctx=ctx)
    assert env.ok, env.error
    risk = {"close": env.data["close"], "horizons": env.data["horizons"]}
    engine = get_engine(settings.service.effective_database_url)
    with engine.begin() as conn:
        conn.execute(ANALYSES.update().where(ANALYSES.c.id == analysis_id).values(report_json={"risk": risk}))


def test_the_scorecard_page_shows_its_plots_of_the_tenants_scores(gateway: tuple[str, str, Settings]) -> None:
    import io

    from PIL import Image

    from tests.apps.api.test_scorecard import _scored

    base, key, settings = gateway
    _scored(settings, analysis_id="a1", tenant="default", signal="BUY", model="m1")
    _with_risk(settings, analysis_id="a1", as_of=date(2012, 6, 29))
    other = create_key(name="other", settings=settings, tenant="other")
    with _client(base, timeout=60) as client:
        _sign_in(client, key)
        page = client.get("/console/scorecard")
        assert page.status_code == 200
        # the stored report's risk forecast, scored once its windows ended: an inline SVG
        svg = page.text.split('aria-labelledby="h-risk-pit"')[1].split("</section>")[0]
        assert "<svg" in svg and svg.count("<rect") == 4 * 7 and "60 sessions" in svg
        sources = re.findall(r'<img src="(/console/scorecard/[^"]+)"', page.text)
        assert sources == ["/console/scorecard/calibration.png", "/console/scorecard/cumulative-excess.png"]
        for source in sources:
            png = client.get(source)
            assert png.status_code == 200 and png.headers["content-type"] == "image/png"
            image = Image.open(io.BytesIO(png.content)).convert("RGB")
            assert len(image.getcolors(maxcolors=1 << 20) or []) > 20  # a drawing, not a blank
        # the filters: a date after the one score leaves nothing to plot; bad input is a 422
        later = client.get("/console/scorecard", params={"since": "2013-01-01"})
        assert later.status_code == 200 and "Nothing scored in this selection" in later.text
        assert "<img" not in later.text
        assert (
            client.get("/console/scorecard/calibration.png", params={"since": "2013-01-01"}).status_code
            == 404
        )
        bad = client.get("/console/scorecard", params={"since": "June"})
        assert bad.status_code == 422 and "YYYY-MM-DD" in bad.text
        assert client.get("/console/scorecard/calibration.png", params={"since": "June"}).status_code == 422
        assert client.get("/console/scorecard/other.png").status_code == 404
        assert (
            client.get("/console/scorecard/calibration.png", params={"backtest": "nope"}).status_code == 404
        )
    with _client(base, timeout=60) as client:
        _sign_in(client, other)  # another tenant: the default tenant's score is not its own
        assert "Nothing scored in this selection" in client.get("/console/scorecard").text
        assert client.get("/console/scorecard/calibration.png").status_code == 404


def test_the_options_view_ladders_the_screens_ranking_by_expiry() -> None:
    from apps.api.console.views import options_view

    def put(contract: str, expiry: str, **more: object) -> dict[str, object]:
        return {"contract": contract, "expiry": expiry, **more}

    # the screen's rows, ranked best first: 07-03's best comes before 06-27's
    screen = {
        "quote_date": "2014-06-06",
        "underlying_price": 645.57,
        "screened": 9,
        "passing_count": 3,
        "passing": [put("A0703", "2014-07-03"), put("B0627", "2014-06-27"), put("C0703", "2014-07-03")],
        "nearest_misses": [put("D0627", "2014-06-27", failed=["open_interest", "delta"])],
    }
    csp = {
        "status": "suggested",
        "suggestion": put("A0703", "2014-07-03"),
        "alternatives": [put("B0627", "2014-06-27"), put("C0703", "2014-07-03")],
        "options": {"source_refs": ["calculate_iv_hv_1", "filter_options_2"]},
    }
    view = options_view(csp, screen, "filter_options_2")
    assert view["chosen"]["contract"] == "A0703"
    # one put per expiry, the first of each in the ranking, ordered by expiry
    assert [r["contract"] for r in view["ladder"]] == ["B0627", "A0703"]
    assert [(r["contract"], r["passes"], r["failed"]) for r in view["slice"]] == [
        ("A0703", True, []),
        ("B0627", True, []),
        ("C0703", True, []),
        ("D0627", False, ["open_interest", "delta"]),
    ]
    assert view["screen"]["screened"] == 9 and view["refs"] == ["calculate_iv_hv_1", "filter_options_2"]
    # a rejection has no chosen put; without a stored screen, no ladder and no slice
    rejected = options_view({**csp, "status": "rejected", "rejected_by": "options"}, None, None)
    assert rejected["chosen"] is None and rejected["ladder"] == [] and rejected["screen"] is None


def test_a_covered_call_from_the_form_shows_its_call_and_screen(
    clean_settings: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The new-analysis form's cost basis reaches the covered-call plan (the API's
    ``options.cost_basis``), and the analysis page shows the options section for calls: AAPL
    2014-06-06 on the Lean chain with a 600 USD basis and the default floors suggests one
    AAPL140621C00670000 (docs/options.md, "Covered calls")."""
    import time

    from pipeline import service
    from pipeline.producer import stop_embedded_worker
    from tests.apps.api.conftest import serve_app
    from tests.conftest import SHARED_DATA

    stocknet, options = SHARED_DATA / "ohlcv" / "stocknet", SHARED_DATA / "options"
    factors = SHARED_DATA / "ohlcv" / "lean" / "factor_files"
    if not (stocknet.is_dir() and options.is_dir() and factors.is_dir()):
        pytest.skip(f"stocknet bars, Lean chains or factor files not found under {SHARED_DATA}")
    for name, value in {
        "FINAGENT_DATA_PROVIDER": "csv",
        "FINAGENT_DATA_DIR": str(stocknet),
        "FINAGENT_OPTIONS_DIR": str(options),
        "FINAGENT_OPTIONS_DIVIDENDS_DIR": str(factors),
    }.items():
        monkeypatch.setenv(name, value)
    get_settings.cache_clear()
    settings = get_settings()
    service.prepare_database(settings=settings)
    key = create_key(name="console-user", settings=settings)
    try:
        with serve_app(settings, lifespan="on") as base, _client(base) as client:
            _sign_in(client, key)
            fields = {"symbol": "AAPL", "as_of": "2014-06-06", "analysis_type": "covered_call"}
            # a basis the API refuses comes back on the form with the field named
            refused = client.post("/console/analyses", data={**_form(client), **fields, "cost_basis": "-5"})
            assert refused.status_code == 422 and "cost_basis" in refused.text
            started = client.post("/console/analyses", data={**_form(client), **fields, "cost_basis": "600"})
            assert started.status_code == 303, started.text[-2000:]
            analysis_id = started.headers["location"].rsplit("/", 1)[1]
            deadline = time.monotonic() + 240
            while time.monotonic() < deadline:
                row = client.get(f"/analyses/{analysis_id}", headers={"X-API-Key": key}).json()
                if row["status"] in ("done", "failed", "stalled"):
                    break
                time.sleep(0.5)
            assert row["status"] == "done", row
            page = client.get(f"/console/analyses/{analysis_id}").text
            listed = client.get("/console/analyses").text
    finally:
        stop_embedded_worker()
    # the answer that matters first is the plan's verdict, not the stock's raw reading
    assert row["headline"].startswith("Covered call: sell 1 AAPL140621C00670000"), row["headline"]
    card = page.split('id="h-headline"')[1].split("</section>")[0]
    # the Answer card: the plan's full verdict (AAPL140621C00670000 is the 670 call), no "…"
    answer = card.split("Stock direction")[0]
    assert "Sell 1 covered call on AAPL: the 670.00 call AAPL140621C00670000" in answer
    assert "…" not in answer and "covering 100 shares." in answer
    assert "Confidence" not in card and "Recommendation" not in card
    assert "confidence" not in card.split("<details>")[0]
    # the list row: the verdict, no confidence column
    assert "Covered call: sell 1 AAPL140621C00670000" in listed and "Confidence" not in listed
    # the JSON keeps the raw reading under details only
    assert "confidence" not in row and row["details"]["raw_signal"] in ("BUY", "HOLD", "SELL")
    assert "Options: covered call" in page
    assert "Sell 1 <code>AAPL140621C00670000</code>" in page
    assert "Best call per expiry" in page and "calls pass the screen" in page
    assert re.search(r'href="#call-filter_calls_[0-9a-f]+"', page)
