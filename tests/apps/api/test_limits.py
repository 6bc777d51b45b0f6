"""Request bodies over FINAGENT_API_MAX_BODY_BYTES get 413 without being read, over real HTTP
(uvicorn on 127.0.0.1, the ``gateway`` fixture of conftest.py); a 422 no longer echoes a large
input back whole."""

from __future__ import annotations

from collections.abc import Iterator

import httpx

from core.settings import Settings


def test_declared_large_body_is_refused_with_413(gateway: tuple[str, str, Settings]) -> None:
    base, key, settings = gateway
    limit = settings.api.max_body_bytes
    body = b'{"symbol": "' + b"A" * (2 * limit) + b'"}'
    resp = httpx.post(
        f"{base}/analyze", content=body, headers={"X-API-Key": key, "Content-Type": "application/json"}
    )
    assert resp.status_code == 413
    assert resp.json() == {"detail": f"request body over {limit} bytes"}
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
