"""``/docs`` and ``/redoc`` render offline: assets from the ``fastapi-offline`` wheel, checked in a
real headless Chromium (skipped with a reason when no browser is installed; ``.ci/run``
installs one)."""

from __future__ import annotations

import re
import shutil
import subprocess
import urllib.request

import pytest

from core.settings import Settings

#: Names under which Debian/Ubuntu and Google ship the browser.
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def _get(url: str) -> tuple[int, str, bytes]:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return resp.status, resp.headers.get("content-type", ""), resp.read()


def _browser() -> str:
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    pytest.skip(
        f"no headless browser installed (looked for {', '.join(BROWSERS)}; .ci/run installs chromium)"
    )


def _rendered_dom(browser: str, url: str) -> str:
    """The DOM after the page's scripts ran (Chromium ``--dump-dom``; ``--virtual-time-budget``
    lets timers and fetches settle before the dump; ``--no-sandbox`` because CI runs as root)."""
    proc = subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--dump-dom",
            "--virtual-time-budget=20000",
            url,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_docs_pages_reference_only_local_assets(gateway: tuple[str, str, Settings]) -> None:
    base, _, _ = gateway
    for page in ("/docs", "/redoc"):
        status, _, body = _get(base + page)
        html = body.decode()
        assert status == 200
        # no CDN: every script, stylesheet and icon is served by the app itself
        refs = re.findall(r"""(?:src|href)=["']([^"']+)["']""", html)
        assert refs, html
        assert all(ref.startswith("/") for ref in refs), refs
        assert "cdn." not in html and "fonts.googleapis" not in html
        for ref in refs:
            status, ctype, asset = _get(base + ref)  # public, no X-API-Key
            assert status == 200 and len(asset) > 1000, (ref, ctype)


def test_swagger_ui_renders_the_operations_in_chromium(gateway: tuple[str, str, Settings]) -> None:
    browser = _browser()
    base, _, _ = gateway
    dom = _rendered_dom(browser, base + "/docs")
    # Swagger UI builds one .opblock per operation from /openapi.json; an empty #swagger-ui
    # (assets not loaded) has none
    paths = set(re.findall(r'class="opblock-summary-path" data-path="([^"]+)"', dom))
    assert {"/health", "/analyze", "/analyses/{analysis_id}", "/watchlists"} <= paths, paths


def test_redoc_renders_the_operations_in_chromium(gateway: tuple[str, str, Settings]) -> None:
    browser = _browser()
    base, _, _ = gateway
    dom = _rendered_dom(browser, base + "/redoc")
    operations = set(re.findall(r'id="(?:tag/[^/"]+/)?operation/([A-Za-z0-9_]+)"', dom))
    assert any(op.startswith("analyze") for op in operations), sorted(operations)[:20]
    assert len(operations) >= 5, operations
