"""``GET /analyses/{id}/chart.png`` and the digests' chart links, through a real uvicorn
process, a real worker, Redis and Postgres (never eager).

A failed analysis comes from the fault-injecting provider ``no_data_once`` on the worker: the
first research request after its marker file is removed answers empty, and with
``max_iterations`` 1 the analysis ends ``failed`` without price history.
"""

from __future__ import annotations

import re
import subprocess
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from db.engine import get_engine
from tests.integration.conftest import Service
from tests.integration.ops_support import Http, poll, start_process, stop_process, wait_http
from tests.support.private_services import free_port

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
FAULTY_WORKER = {
    "FINAGENT_DATA_PROVIDER": "tests.support.providers:no_data_once",
    "FINAGENT_WATCHLISTS_FINALIZE_COUNTDOWN": "1",
}
StartWorker = Callable[..., subprocess.Popen[bytes]]


@pytest.fixture
def api(service: Service) -> Iterator[Http]:
    """``finagent serve`` on a free port with a fresh API key (created by the CLI)."""
    created = service.cli("apikey", "create", "chart-tests")
    assert created.returncode == 0, created.stderr
    port = free_port()
    proc = start_process(service, ["serve", "--host", "127.0.0.1", "--port", str(port)], "api.log")
    base = f"http://127.0.0.1:{port}"
    try:
        wait_http(base, "/openapi.json", proc, lambda: (service.tmp / "api.log").read_text())
        yield Http(base=base, key=created.stdout.strip())
    finally:
        stop_process(proc)


def _raw(api: Http, path: str, headers: dict[str, str] | None = None) -> tuple[int, bytes, dict[str, str]]:
    """GET ``path`` with the API key; ``(status, body bytes, headers with lower-case names)``."""
    req = urllib.request.Request(api.base + path, headers={"X-API-Key": api.key or "", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            status, body, hdrs = resp.status, resp.read(), resp.headers
    except urllib.error.HTTPError as exc:
        status, body, hdrs = exc.code, exc.read(), exc.headers
    return status, body, {k.lower(): v for k, v in hdrs.items()}


def _wait_finished(api: Http, analysis_id: str) -> dict:
    def finished() -> dict | None:
        status, body = api.get(f"/analyses/{analysis_id}")
        assert status == 200, body
        return body if body["status"] in ("done", "failed") else None

    return poll(finished, timeout=180, what=f"analysis {analysis_id} finished")


def _count(service: Service, sql: str, **params: str) -> int:
    with get_engine(service.env["FINAGENT_SERVICE_DATABASE_URL"]).connect() as conn:
        return int(conn.execute(text(sql), params).scalar_one())


def _assert_png(body: bytes) -> None:
    assert body.startswith(PNG_MAGIC), body[:40]
    assert 10_000 < len(body) < 1_000_000, len(body)  # ~50 KB for 1000x600 px candlesticks
    assert body[-12:-4] == b"\x00\x00\x00\x00IEND"  # a whole file, not a truncated one


def test_chart_endpoint_statuses_png_caching_and_tool_call_row(
    service: Service, api: Http, start_worker: StartWorker
) -> None:
    # no worker yet: the analysis stays unfinished → 409 with a reason, no chart_url
    status, failing = api.post(
        "/analyze", {"symbol": "IBM", "as_of": "2011-12-30", "options": {"max_iterations": 1}}
    )
    assert status == 202, failing
    failing_id = failing["analysis_id"]
    chart = f"/analyses/{failing_id}/chart.png"
    status, body = api.get(chart)
    assert status == 409 and body["status"] == "queued" and "not finished" in body["detail"], body
    waiting = api.get(f"/analyses/{failing_id}")[1]
    assert waiting["chart_url"] is None
    # no worker has started it: queued, waiting for research, not stale yet
    assert (waiting["step"], waiting["attempt"], waiting["stale"]) == ("research", 0, False), waiting
    assert waiting["progress"].startswith("waiting for a worker to start research"), waiting

    # auth as on every analysis endpoint; unknown analysis → 404 with a JSON reason, an id that
    # is no UUID → 422 naming it
    assert api.get(chart, key=None)[0] == 401
    assert api.get(chart, key="fa_000000000000_" + "x" * 43)[0] == 403
    unknown = "00000000-0000-4000-8000-000000000000"
    status, body = api.get(f"/analyses/{unknown}/chart.png")
    assert status == 404 and body == {"detail": f"no analysis {unknown}"}
    status, body = api.get("/analyses/no-such-id/chart.png")
    assert status == 422 and body["errors"][0]["loc"] == ["path", "analysis_id"], body

    # the worker's provider answers the first research request empty: this analysis fails
    start_worker(**FAULTY_WORKER)
    finished = _wait_finished(api, failing_id)
    assert finished["status"] == "failed" and finished["chart_url"] is None, finished
    status, body = api.get(chart)
    assert status == 409 and "no price history" in body["detail"], body

    # a finished analysis: chart_url, the PNG, cache headers, one logged render_chart call
    status, ok = api.post("/analyze", {"symbol": "AAPL", "as_of": "2012-06-29"})
    assert status == 202, ok
    done = _wait_finished(api, ok["analysis_id"])
    assert done["status"] == "done", done
    assert done["chart_url"] == f"/analyses/{ok['analysis_id']}/chart.png"
    status, png, headers = _raw(api, done["chart_url"])
    assert status == 200, png[:300]
    assert headers["content-type"] == "image/png"
    _assert_png(png)
    assert int(headers["content-length"]) == len(png)
    assert headers["etag"].startswith('W/"') and "max-age" in headers["cache-control"]
    rows = _count(
        service,
        "SELECT count(*) FROM tool_calls WHERE analysis_id = :a AND tool = 'render_chart' "
        "AND stage = 'chart' AND status = 'success' AND tool_call_id = :t",
        a=ok["analysis_id"],
        t=headers["x-tool-call-id"],
    )
    assert rows == 1
    # the same file the CLI path writes, in the gateway's state dir
    assert (Path(service.env["FINAGENT_SERVICE_STATE_DIR"]) / "charts" / f"{ok['analysis_id']}.png").is_file()

    # conditional request: 304 without a body; a stale tag renders again
    status, empty, again = _raw(api, done["chart_url"], {"If-None-Match": headers["etag"]})
    assert status == 304 and empty == b"" and again["etag"] == headers["etag"]
    status, png2, _ = _raw(api, done["chart_url"], {"If-None-Match": 'W/"stale"'})
    assert status == 200
    _assert_png(png2)
    # the list page carries no chart_url (no state there); the single analysis does
    status, page = api.get("/analyses?symbol=AAPL")
    assert status == 200 and page["items"][0]["chart_url"] is None


def test_digest_links_charts_of_successful_tickers_only(
    service: Service, api: Http, start_worker: StartWorker
) -> None:
    start_worker(**FAULTY_WORKER)
    status, wl = api.post(
        "/watchlists", {"name": "charts", "tickers": ["AAPL", "ZZZZ"], "options": {"max_iterations": 1}}
    )
    assert status == 201, wl
    # a first run takes the injected fault (AAPL fails: no data), ZZZZ is refused (no analysis)
    # a second run on another date succeeds for AAPL
    for run_date in ("2012-06-29", "2012-12-31"):
        status, run = api.post("/watchlists/charts/runs", {"run_date": run_date})
        assert status == 202, run

        def finished(run_date: str = run_date) -> dict | None:
            status, body = api.get(f"/watchlists/charts/runs/{run_date}")
            assert status == 200, body
            return body if body["status"] == "done" else None

        poll(finished, timeout=240, what=f"run {run_date} done")

    status, failed_run = api.get("/watchlists/charts/runs/2012-06-29")
    rows = {t["symbol"]: t for t in failed_run["digest"]["tickers"]}
    assert rows["AAPL"]["outcome"] == "failed" and rows["AAPL"]["chart_url"] is None, rows
    assert rows["ZZZZ"]["outcome"] == "failed" and rows["ZZZZ"]["analysis_id"] is None
    assert rows["ZZZZ"]["chart_url"] is None
    for fmt in ("markdown", "html", "json"):
        status, text_ = api.get(f"/watchlists/charts/runs/2012-06-29/digest?format={fmt}")
        assert status == 200 and "chart.png" not in str(text_), text_

    status, good_run = api.get("/watchlists/charts/runs/2012-12-31")
    rows = {t["symbol"]: t for t in good_run["digest"]["tickers"]}
    aapl = rows["AAPL"]
    url = f"/analyses/{aapl['analysis_id']}/chart.png"
    assert aapl["outcome"] == "ok" and aapl["chart_url"] == url, rows
    assert rows["ZZZZ"]["chart_url"] is None
    status, md = api.get("/watchlists/charts/runs/2012-12-31/digest?format=markdown")
    assert status == 200 and f"[chart]({url})" in md and md.count("chart.png") == 1, md
    status, page = api.get("/watchlists/charts/runs/2012-12-31/digest?format=html")
    assert status == 200 and f'<a href="{url}" type="image/png">chart</a>' in page, page
    assert page.count("chart.png") == 1
    status, js = api.get("/watchlists/charts/runs/2012-12-31/digest?format=json")
    assert status == 200 and [t["chart_url"] for t in js["tickers"]] == [url, None]
    # the link resolves against the gateway (with the same key)
    status, png, headers = _raw(api, url)
    assert status == 200 and headers["content-type"] == "image/png", (status, png[:300])
    _assert_png(png)

    # A gateway with FINAGENT_API_URL_SIGNING_KEY serves the same digest with signed links: a browser
    # (no X-API-Key header) can load the chart as an <img>, and only that chart.
    signed_service = Service(env={**service.env, "FINAGENT_API_URL_SIGNING_KEY": "s" * 40}, tmp=service.tmp)
    port = free_port()
    proc = start_process(
        signed_service, ["serve", "--host", "127.0.0.1", "--port", str(port)], "api-signed.log"
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_http(base, "/openapi.json", proc, lambda: (service.tmp / "api-signed.log").read_text())
        signed_api = Http(base=base, key=api.key)
        status, js = signed_api.get("/watchlists/charts/runs/2012-12-31/digest?format=json")
        assert status == 200 and js["charts_signed"] is True
        signed = js["tickers"][0]["chart_url"]
        assert signed.startswith(url + "?expires=") and "&sig=" in signed
        status, page = signed_api.get("/watchlists/charts/runs/2012-12-31/digest?format=html")
        # each request signs afresh: "expires" (now + TTL, whole seconds) may differ by a second
        # between the two requests, so the page's link is compared by path and checked by use
        (img,) = re.findall(r'<img src="([^"]+)"', page)
        img = img.replace("&amp;", "&")
        assert status == 200 and img.startswith(url + "?expires=") and "&sig=" in img
        assert _raw(Http(base=base, key=None), img)[0] == 200
        browser = Http(base=base, key=None)
        status, png, headers = _raw(browser, signed)
        assert status == 200 and headers["content-type"] == "image/png"
        _assert_png(png)
        assert _raw(browser, url)[0] == 401  # no key, no signature
        assert _raw(browser, signed[:-1] + ("0" if signed[-1] != "0" else "1"))[0] == 403
        other = signed.replace(aapl["analysis_id"], rows["ZZZZ"]["analysis_id"] or "0" * 36)
        assert _raw(browser, other)[0] == 403  # the signature binds the path
        # the plain gateway (no signing key) refuses signed links instead of trusting them
        assert _raw(Http(base=api.base, key=None), signed)[0] == 401
    finally:
        stop_process(proc)
