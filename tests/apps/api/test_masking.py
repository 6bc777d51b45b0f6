"""No configured secret in an HTTP answer (``apps.api.masking``): a row written before
masking existed, an echoed request, a Markdown body; a PNG passes byte for byte."""

from __future__ import annotations

import json
import socket
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date
from pathlib import Path

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from apps.api.auth import create_key
from apps.api.masking import SecretMaskingMiddleware
from core.settings import Settings
from db import ledger
from db.engine import get_engine
from db.migrate import upgrade
from tests.apps.api.conftest import serve_app
from tests.support.secrets import ECHO, KEY


def test_a_row_written_before_masking_is_answered_masked(secret: str, tmp_path: Path) -> None:
    # given an analysis row holding the key, as rows written before this release do (written
    # with sqlite3 directly: the engine would mask it)
    path = tmp_path / "api.sqlite3"
    url = f"sqlite:///{path}"
    upgrade(url=url)
    settings = Settings(service_database_url=url, service_state_dir=tmp_path)
    api_key = create_key(name="reader", settings=settings)
    analysis_id = str(uuid.uuid4())
    assert ledger.create(
        engine=get_engine(url),
        analysis_id=analysis_id,
        symbol="AAPL",
        as_of=date(2012, 6, 29),
        user_query="AAPL",
        max_iterations=3,
        state={"analysis_id": analysis_id},
        lease_seconds=60,
    )
    with sqlite3.connect(path) as conn:
        conn.execute(
            "UPDATE analyses SET status = 'failed', report = ?, report_json = ?, error = ? WHERE id = ?",
            (f"# AAPL\n\n{ECHO}\n", json.dumps({"errors": [ECHO], "volume": 12345678}), ECHO, analysis_id),
        )
    with serve_app(settings) as base, httpx.Client(base_url=base, headers={"X-API-Key": api_key}) as client:
        # when the owner reads it
        answer = client.get(f"/analyses/{analysis_id}")
        # and when a request echoes the key back (a 422 names the bad value)
        echoed = client.get("/analyses", params={"status": KEY})
    # then neither answer holds the key, and the JSON is whole with a fitting length
    assert answer.status_code == 200 and secret not in answer.text
    body = answer.json()
    assert body["error"] == "Incorrect API key provided: ***"
    assert body["report_markdown"] == "# AAPL\n\nIncorrect API key provided: ***\n"
    assert body["report_json"] == {"errors": ["Incorrect API key provided: ***"], "volume": 12345678}
    assert int(answer.headers["content-length"]) == len(answer.content)
    assert echoed.status_code == 422 and secret not in echoed.text and "***" in echoed.text


def _app() -> Starlette:
    png = b"\x89PNG\r\n\x1a\n" + KEY.encode()  # bytes that happen to spell the key: not text

    def markdown(_: Request) -> Response:
        return PlainTextResponse(f"# Digest\n\n{ECHO}\n", media_type="text/markdown")

    def image(_: Request) -> Response:
        return Response(png, media_type="image/png")

    def as_json(_: Request) -> Response:
        return JSONResponse({"detail": ECHO}, headers={"X-Note": KEY})

    routes = [Route("/md", markdown), Route("/png", image), Route("/json", as_json, methods=["GET", "HEAD"])]
    app = Starlette(routes=routes)
    app.add_middleware(SecretMaskingMiddleware)
    return app


@contextmanager
def _served(app: Starlette) -> Iterator[httpx.Client]:
    """``app`` under uvicorn on a free port (real HTTP), and a client of it."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}") as client:
            yield client
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def test_text_bodies_and_headers_are_masked_and_binary_ones_are_not(secret: str) -> None:
    with _served(_app()) as client:
        md = client.get("/md")
        png = client.get("/png")
        as_json = client.get("/json")
        head = client.head("/json")
    assert md.text == "# Digest\n\nIncorrect API key provided: ***\n"
    assert int(md.headers["content-length"]) == len(md.content)
    assert png.content == b"\x89PNG\r\n\x1a\n" + secret.encode()
    assert (
        as_json.json() == {"detail": "Incorrect API key provided: ***"} and as_json.headers["x-note"] == "***"
    )
    assert head.status_code == 200 and head.content == b""


def test_without_a_secret_answers_pass_unchanged(clean_settings: None) -> None:
    with _served(_app()) as client:
        assert client.get("/md").text == f"# Digest\n\n{ECHO}\n"
