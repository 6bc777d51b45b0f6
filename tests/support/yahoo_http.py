"""A local stand-in for Yahoo Finance that the real ``yfinance`` library talks HTTP to.

Serves recorded real Yahoo responses (``tests/agents/providers/fixtures/``; provenance in the
READMEs there) for the endpoints behind ``yfinance.Ticker(symbol).info`` and ``.get_news()``:

* ``/v1/test/getcrumb`` and the cookie pages (``fc.yahoo.com``): a crumb, an empty page;
* ``/v10/finance/quoteSummary/AAPL`` (modules financialData, defaultKeyStatistics, quoteType,
  summaryDetail; recorded 2025-02-24); any other symbol: HTTP 404 with Yahoo's "Quote not found";
* ``/v7/finance/quote?symbols=AAPL`` (recorded 2025-02-17); any other symbol: an empty result;
* ``/ws/fundamentals-timeseries/...`` (``trailingPegRatio``): an empty series list (no numbers);
* ``POST /xhr/ncp`` (news stream, recorded 2025-06-24 for AAPL); any other symbol: an empty stream.

Error answers (a status for every request, e.g. 429 or 500) are set with :attr:`YahooState.status`;
their bodies are the shapes Yahoo sends, without data. ``yahoo_server()`` points yfinance's
process-wide session at the server (every ``https://<host>/path`` is rewritten to
``http://127.0.0.1:<port>/path``) and undoes it afterwards.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit, urlunsplit

import requests
import yfinance as yf
from requests.adapters import HTTPAdapter
from yfinance import cache as yf_cache
from yfinance._http import new_session
from yfinance.data import YfData

FIXTURES = Path(__file__).resolve().parents[1] / "agents" / "providers" / "fixtures"
INFO_NEWS = FIXTURES / "yahoo_info_news"


def _body(path: Path) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))["response"]["bodyJson"]
    return body


SUMMARY_BODY = _body(INFO_NEWS / "yahoo_quoteSummary_AAPL_2025-02-24.json")
QUOTE_BODY = _body(FIXTURES / "yahoo_quote_AAPL_2025-02-17.json")
NEWS_BODY = _body(INFO_NEWS / "yahoo_ncp_news_AAPL_2025-06-24.json")
SUMMARY_NOT_FOUND = {
    "quoteSummary": {"result": None, "error": {"code": "Not Found", "description": "Quote not found"}}
}
EMPTY_QUOTE = {"quoteResponse": {"result": [], "error": None}}
EMPTY_TIMESERIES = {"timeseries": {"result": [], "error": None}}
EMPTY_STREAM = {"data": {"tickerStream": {"stream": []}}, "status": "OK"}
KNOWN = "AAPL"


@dataclass
class YahooState:
    """What the server answers; tests set ``status`` / ``quote_empty`` and read ``requests``."""

    status: int | None = None  # answer every data request with this status (429, 500, ...)
    quote_empty: bool = False  # v7 quote answers an empty result even for AAPL
    requests: list[tuple[str, str, str]] = field(default_factory=list)  # (method, host, path)


class QuietHandler(BaseHTTPRequestHandler):
    """Base for the stand-in handlers: no request log, and ``_send``/``_json`` answer helpers."""

    def log_message(self, format: str, *args: Any) -> None:  # keep pytest output clean
        pass

    def _send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        """Answer ``status`` with ``body`` (bytes) and its ``Content-Type``/``Content-Length``."""
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, payload: dict[str, Any]) -> None:
        """Answer ``status`` with ``payload`` as a JSON body."""
        self._send(status, json.dumps(payload).encode())


def start_server(handler: type[BaseHTTPRequestHandler]) -> ThreadingHTTPServer:
    """Serve ``handler`` on ``127.0.0.1`` at a free port (``server.server_address[1]``) from a
    daemon thread. The caller stops it with ``server.shutdown()`` and ``server.server_close()``."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    return server


def _handler(state: YahooState) -> type[BaseHTTPRequestHandler]:
    class Handler(QuietHandler):
        def _route(self, method: str) -> None:
            parts = urlsplit(self.path)
            query = parse_qs(parts.query)
            length = int(self.headers.get("Content-Length") or 0)
            payload = self.rfile.read(length) if length else b""
            state.requests.append((method, self.headers.get("X-Original-Host", ""), self.path))
            if parts.path == "/v1/test/getcrumb":
                self._send(200, b"local-test-crumb", "text/plain")
                return
            is_data = parts.path.startswith(("/v10/", "/v7/", "/ws/", "/xhr/"))
            if is_data and state.status == 429:
                self._send(429, b"Too Many Requests\r\n", "text/plain")
                return
            if is_data and state.status is not None:
                self._send(state.status, b"<html><body>Internal Server Error</body></html>", "text/html")
                return
            if parts.path.startswith("/v10/finance/quoteSummary/"):
                found = parts.path.rsplit("/", 1)[-1] == KNOWN
                self._json(200 if found else 404, SUMMARY_BODY if found else SUMMARY_NOT_FOUND)
            elif parts.path.startswith("/v7/finance/quote"):
                found = query.get("symbols") == [KNOWN] and not state.quote_empty
                self._json(200, QUOTE_BODY if found else EMPTY_QUOTE)
            elif parts.path.startswith("/ws/fundamentals-timeseries/"):
                self._json(200, EMPTY_TIMESERIES)
            elif parts.path == "/xhr/ncp":
                symbols = json.loads(payload or b"{}").get("serviceConfig", {}).get("s", [])
                self._json(200, NEWS_BODY if symbols == [KNOWN] else EMPTY_STREAM)
            else:  # fc.yahoo.com / guce.yahoo.com cookie pages: an empty page, no cookie
                self._send(200, b"<html><body></body></html>", "text/html")

        def do_GET(self) -> None:
            self._route("GET")

        def do_POST(self) -> None:
            self._route("POST")

    return Handler


class RedirectToLocal(HTTPAdapter):
    """Send every request to ``127.0.0.1:<port>`` over plain HTTP, keeping path and query."""

    def __init__(self, port: int) -> None:
        super().__init__(max_retries=0)
        self.port = port

    def send(self, request: requests.PreparedRequest, *args: Any, **kwargs: Any) -> requests.Response:
        """Rewrite the URL to the local server (the original host goes in ``X-Original-Host``)."""
        parts = urlsplit(request.url or "")
        request.headers["X-Original-Host"] = parts.netloc
        request.url = urlunsplit(("http", f"127.0.0.1:{self.port}", parts.path, parts.query, ""))
        return super().send(request, *args, **kwargs)


def session_for(port: int) -> requests.Session:
    """A ``requests`` session whose every request goes to the local server on ``port``."""
    session = requests.Session()
    adapter = RedirectToLocal(port)
    session.mount("https://", adapter)
    session.mount("http://", adapter)
    return session


def reset_yfinance() -> None:
    """Forget the local server: yfinance keeps one process-wide session, crumb and GET cache."""
    data = YfData()
    data._crumb = None
    data._cookie = None
    data._cookie_strategy = "basic"  # an HTTP error makes yfinance switch strategy for the process
    YfData.cache_get.cache_clear()
    data._set_session(new_session())


@contextmanager
def yahoo_server(cache_dir: Path, *, port: int | None = None) -> Iterator[tuple[YahooState, int]]:
    """Run the stand-in and route yfinance's process-wide session to it.

    Args:
        cache_dir: a temporary folder for yfinance's on-disk time-zone and cookie caches.
        port: route to this port instead of starting a server (a port nobody listens on gives a
            refused connection); the yielded state then records nothing.
    Yields:
        ``(state, port)``.
    """
    previous_cache = yf_cache._TzDBManager.get_location()
    yf.set_tz_cache_location(str(cache_dir))
    state = YahooState()
    server = None
    if port is None:
        server = start_server(_handler(state))
        port = server.server_address[1]
    reset_yfinance()
    YfData(session=session_for(port))
    try:
        yield state, port
    finally:
        if server is not None:
            server.shutdown()
            server.server_close()
        reset_yfinance()
        yf.set_tz_cache_location(previous_cache)
