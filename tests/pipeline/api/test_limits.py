"""Request bodies over FINAGENT_API_MAX_BODY_BYTES get 413 without being read, over real HTTP
(uvicorn on 127.0.0.1); a 422 no longer echoes a large input back whole."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn

from db.migrate import upgrade
from pipeline.api.app import create_app
from pipeline.api.auth import create_key
from pipeline.core.settings import Settings

LIMIT = 64 * 1024


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[tuple[str, str, Settings]]:
    url = f"sqlite:///{tmp_path / 'api.sqlite3'}"
    upgrade(url=url)
    settings = Settings(database_url=url, state_dir=tmp_path, api_max_body_bytes=LIMIT)
    key = create_key(name="limits", settings=settings)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    # lifespan off: no embedded worker is needed to refuse or validate a request
    server = uvicorn.Server(
        uvicorn.Config(create_app(settings), host="127.0.0.1", port=port, lifespan="off", log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.started
    try:
        yield f"http://127.0.0.1:{port}", key, settings
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def test_declared_large_body_is_refused_with_413(gateway: tuple[str, str, Settings]) -> None:
    base, key, _ = gateway
    body = b'{"symbol": "' + b"A" * (2 * LIMIT) + b'"}'
    resp = httpx.post(
        f"{base}/analyze", content=body, headers={"X-API-Key": key, "Content-Type": "application/json"}
    )
    assert resp.status_code == 413
    assert resp.json() == {"detail": f"request body over {LIMIT} bytes"}
    assert len(resp.content) < 200


def test_chunked_large_body_is_refused_with_413(gateway: tuple[str, str, Settings]) -> None:
    base, key, _ = gateway

    def chunks() -> Iterator[bytes]:
        yield b'{"symbol": "'
        for _ in range(40):
            yield b"A" * 4096
        yield b'"}'

    resp = httpx.post(
        f"{base}/analyze", content=chunks(), headers={"X-API-Key": key, "Content-Type": "application/json"}
    )
    assert resp.status_code == 413


def test_invalid_body_within_the_limit_gets_a_short_422(gateway: tuple[str, str, Settings]) -> None:
    base, key, _ = gateway
    resp = httpx.post(
        f"{base}/analyze",
        json={"symbol": "AAPL", "options": {"max_iterations": 3, "junk": "x" * 20_000}},
        headers={"X-API-Key": key},
    )
    assert resp.status_code == 422
    assert len(resp.content) < 2_000
    assert "options.junk" in resp.json()["detail"]
