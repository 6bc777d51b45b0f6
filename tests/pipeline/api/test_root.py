"""``GET /``: a person who opens the gateway's address in a browser lands on the console."""

from __future__ import annotations

import httpx

from core.settings import Settings


def test_the_root_redirects_to_the_console(gateway: tuple[str, str, Settings]) -> None:
    base, _, _ = gateway
    answer = httpx.get(f"{base}/", timeout=30)
    assert answer.status_code == 307 and answer.headers["location"] == "/console"
    followed = httpx.get(f"{base}/", timeout=30, follow_redirects=True)
    assert followed.status_code == 200 and str(followed.url).startswith(f"{base}/console")
    assert "text/html" in followed.headers["content-type"]
    # not an API operation: the OpenAPI document does not list it
    assert "/" not in httpx.get(f"{base}/openapi.json", timeout=30).json()["paths"]
