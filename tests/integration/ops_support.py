"""Helpers for the operations integration tests: a real uvicorn / beat / Flower subprocess on a
free port, bounded HTTP polling. Every process is stopped (TERM, then KILL) by the caller's
fixture."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.integration.conftest import FINAGENT, Service

START_TIMEOUT_S = 60


@dataclass
class Http:
    """A tiny JSON HTTP client (stdlib only, so it cannot share state with the server)."""

    base: str
    key: str | None = None

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        headers: dict[str, str] | None = None,
        key: str | bool | None = True,
    ) -> tuple[int, Any, dict[str, str]]:
        """``(status, parsed JSON or text, headers)``; ``key=True`` sends the default key,
        ``None``/``False`` none, a string that string."""
        hdrs = {"Content-Type": "application/json", **(headers or {})}
        token = self.key if key is True else key or None
        if token:
            hdrs["X-API-Key"] = token
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + path, data=data, method=method, headers=hdrs)
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                status, raw, out_headers = resp.status, resp.read(), dict(resp.headers)
        except urllib.error.HTTPError as exc:
            status, raw, out_headers = exc.code, exc.read(), dict(exc.headers)
        text = raw.decode()
        try:
            return status, json.loads(text) if text else None, out_headers
        except json.JSONDecodeError:
            return status, text, out_headers

    def get(self, path: str, **kw: Any) -> tuple[int, Any]:
        """GET; returns ``(status, body)``."""
        status, body, _ = self.request("GET", path, **kw)
        return status, body

    def post(self, path: str, body: Any = None, **kw: Any) -> tuple[int, Any]:
        """POST JSON; returns ``(status, body)``."""
        status, out, _ = self.request("POST", path, body, **kw)
        return status, out


def poll(check: Callable[[], Any], *, timeout: float, interval: float = 0.5, what: str = "condition") -> Any:
    """Call ``check`` until it returns a truthy value (returned); AssertionError after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout}s (last: {value!r})")
        time.sleep(interval)


def start_process(
    service: Service, args: list[str], log_name: str, **extra_env: str
) -> subprocess.Popen[bytes]:
    """Start ``finagent ARGS`` in its own session, output to ``service.tmp/log_name``."""
    log = service.tmp / log_name
    service.logs.append(log)
    with log.open("wb") as fh:
        return subprocess.Popen(
            [FINAGENT, *args],
            env={**service.env, **extra_env},
            cwd=service.tmp,
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def stop_process(proc: subprocess.Popen[bytes]) -> None:
    """TERM the process group, KILL it after 20 s."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def wait_http(base: str, path: str, proc: subprocess.Popen[bytes], log_text: Callable[[], str]) -> None:
    """Wait until ``base + path`` answers at all (any status), bounded by ``START_TIMEOUT_S``."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode}: {log_text()[-3000:]}")
        try:
            with urllib.request.urlopen(base + path, timeout=2):
                return
        except urllib.error.HTTPError:
            return
        except OSError:
            time.sleep(0.3)
    raise RuntimeError(f"{base}{path} did not answer in {START_TIMEOUT_S}s: {log_text()[-3000:]}")


def start_probe_worker(*, module: str, queue: str, env: dict[str, str], cwd: Path) -> subprocess.Popen[bytes]:
    """A real Celery prefork worker (one child) of the small probe app ``module`` (a file in
    ``cwd`` written by the test, importing ``tasks.app`` so finagent's worker signal receivers run),
    consuming ``queue``; its output goes to ``cwd/worker.log``. The caller stops it
    (:func:`stop_process`). Used by the tests that look inside a worker child."""
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", module, "worker", "-Q", queue, "-c", "1", "-P", "prefork",
         "--loglevel", "INFO", "--without-heartbeat", "--without-mingle", "--without-gossip"],
        env=env, cwd=cwd, stdout=(cwd / "worker.log").open("wb"), stderr=subprocess.STDOUT,
        start_new_session=True,
    )  # fmt: skip


def send_probe(*, call: str, env: dict[str, str], cwd: Path) -> None:
    """Send one task of a probe app by running ``call`` (Python, e.g. ``"import m; m.t.apply_async()"``)
    in a fresh process. Raises ``AssertionError`` with the sender's stderr when it fails."""
    sender = subprocess.run(
        [sys.executable, "-c", call],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert sender.returncode == 0, sender.stderr[-2000:]
