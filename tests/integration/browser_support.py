"""What the console's browser tests share: the system's Chromium (Playwright never downloads a
browser here; the tests skip with a reason when there is none), a served gateway with keys of
two tenants, axe-core (vendored in ``axe/``) and the screenshot check."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import urldefrag, urljoin, urlparse

import pytest
from PIL import Image

from tests.integration.conftest import Service
from tests.integration.ops_support import start_process, stop_process, wait_http
from tests.support.private_services import free_port

AXE = Path(__file__).with_name("axe") / "axe.min.js"
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
#: Chromium's switches for a quiet headless run as root in CI (no sandbox, no GPU, no calls home).
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"


def browser_path() -> str:
    """The installed Chromium (or Chrome); skips the test with a reason when there is none."""
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    pytest.skip(
        f"no headless browser installed (looked for {', '.join(BROWSERS)}; .ci/run installs chromium)"
    )


@dataclass
class Console:
    """The served gateway: base URL, the ``acme`` tenant's key and the ``globex`` tenant's."""

    base: str
    acme: str
    globex: str
    service: Service


def serve_console(service: Service, start_worker: Any | None) -> Iterator[Console]:
    """``finagent serve`` on a free port and one key in each of two tenants; a worker first
    when ``start_worker`` is given (else the test starts one when it wants work to run)."""
    keys = {}
    for tenant in ("acme", "globex"):
        proc = service.cli("apikey", "create", f"{tenant}-ui", "--tenant", tenant)
        assert proc.returncode == 0, proc.stderr
        keys[tenant] = proc.stdout.strip()
    if start_worker is not None:
        start_worker()
    port = free_port()
    server = start_process(service, ["serve", "--host", "127.0.0.1", "--port", str(port)], "api.log")
    base = f"http://127.0.0.1:{port}"
    try:
        wait_http(base, "/openapi.json", server, lambda: (service.tmp / "api.log").read_text())
        yield Console(base=base, acme=keys["acme"], globex=keys["globex"], service=service)
    finally:
        stop_process(server)
    log = (service.tmp / "api.log").read_text()
    assert keys["acme"] not in log and keys["globex"] not in log  # keys never reach the log


def non_blank(path: Path) -> None:
    """The screenshot has content: many colours, and no single colour covers 97 % of it."""
    with Image.open(path) as img:
        rgb = img.convert("RGB")
        colours = rgb.getcolors(maxcolors=1 << 20) or []
    total = rgb.width * rgb.height
    assert len(colours) > 20, (path, len(colours))
    assert max(count for count, _ in colours) < 0.97 * total, path


@cache
def _axe_source() -> str:
    """The vendored axe-core script's text (read once per process)."""
    return AXE.read_text(encoding="utf-8")


def axe(page: Any, name: str) -> None:
    """No serious or critical axe-core violation (WCAG 2.x A and AA rules) on ``page``."""
    # evaluated over the DevTools protocol, which the page's CSP (no inline scripts) does not
    # govern; the page's own scripts stay under it, so console.js is tested as users get it.
    # Once per document: the second scan of a page (at another width) reuses it, instead of
    # sending and compiling its 650 kB again.
    if not page.evaluate("() => typeof window.axe === 'object' && typeof window.axe.run === 'function'"):
        page.evaluate(_axe_source())
    result = page.evaluate(
        "async () => await axe.run(document, {runOnly: {type: 'tag', values: "
        "['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa']}})"
    )
    bad = [
        (v["id"], v["impact"], [n["target"] for n in v["nodes"]][:3])
        for v in result["violations"]
        if v["impact"] in ("serious", "critical")
    ]
    assert not bad, (name, bad)


def check(page: Any, shots: Path, name: str) -> None:
    """Screenshot ``page`` (checked non-blank) and scan it with axe-core."""
    shot = shots / f"{name}.png"
    page.screenshot(path=str(shot), full_page=True)
    non_blank(shot)
    axe(page, name)


def sign_in(page: Any, base: str, key: str) -> None:
    """Sign in on the console's form with ``key``."""
    page.goto(f"{base}/console/login")
    page.fill("#api_key", key)
    page.click("form.card button[type=submit]")


def crawl(page: Any, base: str, shots: Path) -> list[str]:
    """Visit every console page linked from ``/console/analyses`` on (same site, under
    ``/console/``), breadth first: each answers below 500, carries no template text, fits a
    390 px screen, and passes axe-core at 1280 and 390 px. PNG links must answer 200. Returns
    the paths visited, in order (the first one's page at 390 px is ``shots/index-390.png``)."""
    queue, seen, visited = ["/console/analyses"], {"/console/analyses"}, []
    images: set[str] = set()
    while queue:
        path = queue.pop(0)
        answer = page.goto(base + path)
        assert answer is not None and answer.status < 500, (path, answer and answer.status)
        body = answer.text()
        assert "{{" not in body and "{%" not in body, path
        if page.locator(".pricechart").count():
            page.wait_for_selector(".pricechart[data-ready=drawn]", timeout=60_000)
        html = page.content()
        assert "{{" not in html and "{%" not in html, path
        axe(page, f"{path} at 1280 px")
        page.set_viewport_size({"width": 390, "height": 844})
        page.wait_for_timeout(150)
        width = page.evaluate("() => document.documentElement.scrollWidth")
        assert width <= 391, (path, width)
        axe(page, f"{path} at 390 px")
        if not visited:
            page.screenshot(path=str(shots / "index-390.png"), full_page=True)
        page.set_viewport_size({"width": 1280, "height": 900})
        visited.append(path)
        for href in page.eval_on_selector_all("a[href]", "els => els.map(e => e.getAttribute('href'))"):
            target = urldefrag(urljoin(base + path, href)).url
            parsed = urlparse(target)
            if not target.startswith(base + "/console/"):
                continue  # another site (the chart library's credit), or the page itself
            local = parsed.path + (f"?{parsed.query}" if parsed.query else "")
            if parsed.path.endswith(".png"):
                images.add(local)
            elif local not in seen:
                seen.add(local)
                queue.append(local)
    for image in sorted(images):
        assert page.request.get(base + image).status == 200, image
    return visited
