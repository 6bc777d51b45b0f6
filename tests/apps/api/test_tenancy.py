"""Two tenants on one gateway: every endpoint refuses the other tenant's objects with 404.

Tenant ``acme`` (key A) runs a real analysis and a real watchlist run on the embedded worker
(real AAPL/MSFT data of the embedded dataset); tenant ``globex`` (key B, every scope) then
tries each endpoint on acme's objects: list, read, write, delete, run, digest, chart, signed
link and session follow-up. Each answer must be the answer for an object that does not exist,
and acme's objects must be intact afterwards.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from apps.api.auth import create_key
from core.settings import Settings, get_settings
from tests.apps.api.conftest import serve_app

RUN_DATE = "2012-06-29"  # a Friday inside the embedded dataset (AAPL, MSFT: 2000-03 .. 2013-03)


def _poll(check: Any, *, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while (value := check()) is None:
        assert time.monotonic() < deadline, f"{what} not reached within {timeout} s"
        time.sleep(0.3)
    return value


@pytest.fixture
def two_tenants(
    clean_settings: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Iterator[tuple[httpx.Client, httpx.Client, Settings]]:
    """A gateway (embedded worker, signed links on) and clients for acme (A) and globex (B)."""
    from pipeline.producer import stop_embedded_worker

    monkeypatch.setenv("FINAGENT_API_URL_SIGNING_KEY", "s" * 40)
    monkeypatch.setenv("FINAGENT_WATCHLISTS_FINALIZE_COUNTDOWN", "1")
    get_settings.cache_clear()
    settings = get_settings()
    from pipeline import service

    service.prepare_database(settings=settings)
    key_a = create_key(name="alice", tenant="acme", settings=settings)
    key_b = create_key(
        name="bob", tenant="globex", scopes=("read", "analyze", "watchlists", "admin"), settings=settings
    )
    try:
        with (
            serve_app(settings, lifespan="on") as base,
            httpx.Client(base_url=base, headers={"X-API-Key": key_a}, timeout=60) as a,
            httpx.Client(base_url=base, headers={"X-API-Key": key_b}, timeout=60) as b,
        ):
            yield a, b, settings
    finally:
        stop_embedded_worker()


def _finished(client: httpx.Client, path: str) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        response = client.get(path)
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body if body["status"] in ("done", "failed") else None

    return dict(_poll(check, timeout=180, what=f"{path} finished"))


def test_every_endpoint_refuses_the_other_tenants_objects(
    two_tenants: tuple[httpx.Client, httpx.Client, Settings],
) -> None:
    a, b, _ = two_tenants
    # --- acme's objects: an analysis in a session, a watchlist and a finished run with a digest
    accepted = a.post("/analyze", json={"symbol": "AAPL", "as_of": RUN_DATE, "session_id": "s1"})
    assert accepted.status_code == 202, accepted.text
    analysis_id = accepted.json()["analysis_id"]
    assert _finished(a, f"/analyses/{analysis_id}")["status"] == "done"
    assert a.post("/watchlists", json={"name": "tech", "tickers": ["MSFT"]}).status_code == 201
    run = a.post("/watchlists/tech/runs", json={"run_date": RUN_DATE})
    assert run.status_code == 202, run.text

    def digest_ready() -> dict[str, Any] | None:
        response = a.get(f"/watchlists/tech/runs/{RUN_DATE}/digest", params={"format": "json"})
        return response.json() if response.status_code == 200 else None

    digest = _poll(digest_ready, timeout=180, what="acme's digest")
    signed_link = digest["tickers"][0]["chart_url"]
    assert "sig=" in signed_link  # signing is on: the digest carries signed chart links

    # --- what an unknown object looks like to B: the reference answers
    unknown_analysis = b.get("/analyses/00000000-0000-0000-0000-000000000000")
    unknown_watchlist = b.get("/watchlists/nosuch")
    assert unknown_analysis.status_code == unknown_watchlist.status_code == 404

    def same_as_unknown(response: httpx.Response, reference: httpx.Response, *, object_id: str) -> None:
        assert response.status_code == 404, (response.request.url, response.text)
        ref_id = "00000000-0000-0000-0000-000000000000" if "analysis" in reference.text else "nosuch"
        assert response.json()["detail"] == reference.json()["detail"].replace(ref_id, object_id)

    # read, chart, list
    same_as_unknown(b.get(f"/analyses/{analysis_id}"), unknown_analysis, object_id=analysis_id)
    same_as_unknown(b.get(f"/analyses/{analysis_id}/chart.png"), unknown_analysis, object_id=analysis_id)
    assert analysis_id not in b.get("/analyses", params={"limit": 200}).text
    assert b.get("/watchlists").json() == []
    # watchlist read, write, delete, run, runs, digest
    for response in (
        b.get("/watchlists/tech"),
        b.patch("/watchlists/tech", json={"tickers": ["IBM"]}),
        b.delete("/watchlists/tech"),
        b.post("/watchlists/tech/runs", json={"run_date": RUN_DATE}),
        b.get("/watchlists/tech/runs"),
        b.get(f"/watchlists/tech/runs/{RUN_DATE}"),
        b.get(f"/watchlists/tech/runs/{RUN_DATE}/digest"),
    ):
        same_as_unknown(response, unknown_watchlist, object_id="tech")
    # B's own watchlist of the same name: no 409, the name is not revealed as taken
    assert b.post("/watchlists", json={"name": "tech", "tickers": ["IBM"]}).status_code == 201
    assert [w["tickers"] for w in b.get("/watchlists").json()] == [["IBM"]]

    # session follow-up: B's "s1" is not acme's "s1" (nothing to inherit → 422, nothing enqueued)
    follow_up = b.post("/analyze", json={"session_id": "s1"})
    assert follow_up.status_code == 422 and "no ticker" in follow_up.json()["detail"]
    # A's follow-up in its own session inherits the as_of it chose
    mine = a.post("/analyze", json={"query": "what about MSFT?", "session_id": "s1"})
    assert (
        mine.status_code == 202 and mine.json()["as_of"] == RUN_DATE and "as_of" in mine.json()["inherited"]
    )

    # signed links: the link opens its own chart for anyone holding it (no key) ...
    path, _, query = signed_link.partition("?")
    with httpx.Client(base_url=str(a.base_url), timeout=60) as anonymous:
        assert anonymous.get(signed_link).status_code == 200
        # ... but never another object's chart: its signature binds its own path
        other = f"/analyses/{analysis_id}/chart.png?{query}"
        assert urlsplit(other).path != path
        assert anonymous.get(other).status_code == 403
    # a key takes precedence over a signature: B's key with acme's signed link is B's request
    assert b.get(signed_link).status_code == 404

    # --- acme's objects are untouched
    assert a.get(f"/analyses/{analysis_id}").status_code == 200
    assert a.get(f"/analyses/{analysis_id}/chart.png").headers["content-type"] == "image/png"
    assert a.get("/watchlists/tech").json()["tickers"] == ["MSFT"]
    assert [r["run_date"] for r in a.get("/watchlists/tech/runs").json()] == [RUN_DATE]
    assert analysis_id in a.get("/analyses", params={"limit": 200}).text
    # B's list holds only what B made: the watchlist above (its failed follow-up stored nothing)
    assert b.get("/analyses").json()["items"] == []
