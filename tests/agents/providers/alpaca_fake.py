"""A local Alpaca market-data stand-in and the settings that point at it, shared by the client
tests (``tests/agents/providers/test_alpaca.py``) and the ``get_stock_price`` tool tests
(``tests/agents/tools/test_alpaca_price.py``); the fixtures are in ``tests/agents/conftest.py``.
"""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

from pydantic import SecretStr

from agents.data.market.alpaca import RATE_LIMIT_BUCKET
from core.settings import Settings

KEY = "PKTESTKEY0123456789"
SECRET = "sEcReT-abcdefghijklmnopqrstuvwxyz"

# A /snapshots answer shaped like Alpaca's documented example (docs/design.md, "Snapshot mapping").
SEED_SNAPSHOT = {
    "AAPL": {
        "latestTrade": {"t": 1708312800000000000, "p": 178.52, "s": 100, "x": "V"},
        "latestQuote": {"t": 1708312800000000000, "bp": 178.50, "ap": 178.52},
        "prevDay": {"c": 176.18},
    }
}
# Alpaca's live format: RFC 3339 text with nanoseconds.
LIVE_SNAPSHOT = {
    "MSFT": {
        "latestTrade": {"t": "2024-02-19T15:59:59.123456789Z", "p": 400.0, "s": 10, "x": "V"},
        "prevDay": {"c": 404.5, "o": 1, "h": 1, "l": 1, "v": 1},
    }
}


# Redis db 8: no other test uses it (tests use 0, 3, 14, 15); the bucket key is cleaned up.
def rate_redis_url() -> str:
    """The Redis of the shared rate-limit tests: this test process's own
    (``tests.support.redis_db.redis_url_for_tests``)."""
    from tests.support.redis_db import redis_url_for_tests

    return redis_url_for_tests()


BUCKET_KEY = f"finagent:ratelimit:{RATE_LIMIT_BUCKET}"
# One token per 100 s: after the first request the next token is ~100 s away.
TINY_BUCKET: dict[str, Any] = {"broker_alpaca_rate_per_min": 0.6, "broker_alpaca_rate_burst": 1}
HINT = re.compile(r"^Retry in (\d+\.\d)s \((.+)\)\.$")


class FakeAlpaca:
    """A local Alpaca market-data stand-in on a ``ThreadingHTTPServer``: ``/v2/stocks/snapshots``
    answers the example snapshots; tickers ERR/BAD/LIM/UNPR give HTTP 500/403/429/422, SLOW sleeps
    ``slow_seconds``, HALF is a malformed snapshot, ``limit_headers[ticker]`` a 429 with headers.
    ``requests`` records every request; ``url`` ends in ``/v2``."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.slow_seconds = 0.0
        self.limit_headers: dict[str, dict[str, str]] = {}
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                parsed = urlparse(self.path)
                symbols = parse_qs(parsed.query).get("symbols", [""])[0]
                outer.requests.append(
                    {"path": parsed.path, "symbols": symbols, "headers": dict(self.headers)}
                )
                if parsed.path != "/v2/stocks/snapshots":
                    return self._send(404, {"message": "not found"})
                if symbols == "SLOW":
                    time.sleep(outer.slow_seconds)
                    return self._send(200, {})
                status = {"ERR": 500, "BAD": 403, "LIM": 429, "UNPR": 422}.get(symbols)
                if status:
                    return self._send(status, {"message": f"error {status}"})
                if symbols in outer.limit_headers:  # HTTP 429 with rate-limit headers
                    return self._send(429, {"message": "too many requests"}, outer.limit_headers[symbols])
                body = {**SEED_SNAPSHOT, **LIVE_SNAPSHOT}
                if symbols == "HALF":
                    body = {"HALF": {"latestTrade": {"p": 1.0}}}
                return self._send(200, {k: v for k, v in body.items() if k in symbols.split(",")})

            def _send(self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
                blob = json.dumps(body).encode()
                try:
                    self.send_response(status)
                    for name, value in (headers or {}).items():
                        self.send_header(name, value)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(blob)))
                    self.end_headers()
                    self.wfile.write(blob)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v2"
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def alpaca_settings(server: FakeAlpaca, **extra: Any) -> Settings:
    """Settings with test keys pointing at ``server``; the shared Alpaca bucket out of the way
    unless ``extra`` shrinks it."""
    values: dict[str, Any] = {
        "broker_alpaca_api_key": SecretStr(KEY),
        "broker_alpaca_secret_key": SecretStr(SECRET),
        "broker_alpaca_data_url": server.url,
        "data_tool_timeout": 5.0,
        "broker_alpaca_retry_base": 0.01,
        # The shared Alpaca bucket is out of the way here; the rate-limit tests below shrink it.
        "broker_alpaca_rate_per_min": 1e9,
        "broker_alpaca_rate_burst": 1000,
    }
    values.update(extra)
    return Settings(**values)


def hint_seconds(hint: str | None) -> float:
    """The seconds of a ``Retry in N s (why).`` hint (asserts the format)."""
    match = HINT.match(hint or "")
    assert match, hint
    return float(match.group(1))


def assert_no_secrets(*texts: str) -> None:
    """Neither test key appears in any of ``texts``."""
    for text in texts:
        assert KEY not in text and SECRET not in text
