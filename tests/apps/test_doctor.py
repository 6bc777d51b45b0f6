"""``finagent doctor`` and ``apps.doctor.diagnose``: what is configured and reachable, against
real services (the local PostgreSQL and Redis, closed ports, local HTTP servers standing in for
Yahoo and an LLM server), never printing a secret, bounded in time, and exiting 3 when something
configured cannot be reached."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from apps import doctor
from core.settings import Settings
from tests.llm.server import ScriptedLLM
from tests.support.private_services import free_port
from tests.support.redis_db import redis_db_for_process

FINAGENT = str(Path(sys.executable).with_name("finagent"))
SECRET = "pw-9f3b2c71d0"


def _by_name(diagnosis: doctor.Diagnosis) -> dict[str, doctor.Check]:
    return {check.name: check for check in diagnosis.checks}


def _closed_port() -> int:
    """A port nobody listens on (the kernel's free one, left closed)."""
    return free_port()


@pytest.fixture
def yahoo() -> Iterator[str]:
    """A local HTTP server standing in for Yahoo's host (answers HEAD with 200)."""

    class Handler(BaseHTTPRequestHandler):
        def do_HEAD(self) -> None:
            self.send_response(200)
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts connections and never answers (a black-holed host)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    try:
        yield listener.getsockname()[1]
    finally:
        listener.close()


@pytest.mark.usefixtures("clean_settings")
def test_the_embedded_default_is_all_reachable_with_its_data_span() -> None:
    diagnosis = doctor.diagnose(settings=Settings())
    checks = _by_name(diagnosis)
    assert diagnosis.mode == "embedded" and diagnosis.ok and diagnosis.failing == ()
    assert checks["bars"].source == "embedded" and checks["bars"].status == "ok"
    assert checks["broker"].source == "memory" and checks["broker"].status == "ok"
    # a fresh state folder: no SQLite file yet, which the first analysis creates
    assert checks["database"].status == "ok" and "not created yet" in checks["database"].detail
    # optional things not set are said, and are no failure
    assert checks["option chains"].status == "not configured" and not checks["option chains"].configured
    assert checks["llm"].status == "not configured"
    span = diagnosis.data
    assert span is not None and not span.online
    # the embedded data: bokeh_sampledata's five tickers, ending 2013-03-01 (README)
    assert set(span.tickers) == {"AAPL", "FB", "GOOG", "IBM", "MSFT"} and span.ticker_count == 5
    assert span.last is not None and span.last.isoformat() == "2013-03-01"
    assert span.first is not None and span.first.year == 2000
    assert any("FINAGENT_DATA_PROVIDER=yfinance" in note for note in diagnosis.notes)
    as_json = json.loads(json.dumps(diagnosis.as_dict()))
    assert as_json["ok"] is True and as_json["data"]["last"] == "2013-03-01"


@pytest.mark.usefixtures("clean_settings")
def test_service_mode_reaches_the_real_database_and_redis(pg_url: str) -> None:
    redis_url = f"redis://127.0.0.1:6379/{redis_db_for_process()}"
    diagnosis = doctor.diagnose(
        settings=Settings(service_broker_url=redis_url, service_database_url=pg_url), span=False
    )
    checks = _by_name(diagnosis)
    assert diagnosis.mode == "service" and diagnosis.ok, diagnosis.failing
    assert checks["broker"].status == "ok" and "Redis" in checks["broker"].detail
    assert checks["database"].status == "ok" and "schema" in checks["database"].detail
    assert checks["database"].source == "postgresql"


@pytest.mark.usefixtures("clean_settings")
def test_an_unreachable_broker_and_database_fail_without_showing_the_password() -> None:
    port = _closed_port()
    settings = Settings(
        service_broker_url=f"redis://:{SECRET}@127.0.0.1:{port}/0",
        service_database_url=f"postgresql+psycopg://postgres:{SECRET}@127.0.0.1:{port}/finagent",
    )
    diagnosis = doctor.diagnose(settings=settings, timeout=2.0, span=False)
    checks = _by_name(diagnosis)
    assert not diagnosis.ok
    assert {c.name for c in diagnosis.failing} == {"broker", "database"}
    assert checks["broker"].status == "unreachable" and checks["database"].status == "unreachable"
    assert SECRET not in json.dumps(diagnosis.as_dict())
    assert checks["broker"].target == f"redis://:***@127.0.0.1:{port}/0"


@pytest.mark.usefixtures("clean_settings")
def test_online_sources_are_reached_over_http(monkeypatch: pytest.MonkeyPatch, yahoo: str) -> None:
    monkeypatch.setattr(doctor, "YAHOO_URL", yahoo)
    diagnosis = doctor.diagnose(
        settings=Settings(data_provider="yfinance", data_news_provider="yfinance"), span=False
    )
    checks = _by_name(diagnosis)
    for name in ("bars", "fundamentals", "news", "option chains"):
        assert checks[name].source == "yfinance" and checks[name].status == "ok", checks[name]
        assert "HTTP 200" in checks[name].detail
    monkeypatch.setattr(doctor, "YAHOO_URL", f"http://127.0.0.1:{_closed_port()}")
    down = _by_name(doctor.diagnose(settings=Settings(data_provider="yfinance"), timeout=2.0, span=False))
    assert down["bars"].status == "unreachable" and down["bars"].failed


@pytest.mark.usefixtures("clean_settings")
def test_a_host_that_never_answers_is_unreachable_within_the_timeout(
    monkeypatch: pytest.MonkeyPatch, silent_port: int
) -> None:
    monkeypatch.setattr(doctor, "YAHOO_URL", f"http://127.0.0.1:{silent_port}")
    checks = _by_name(doctor.diagnose(settings=Settings(data_provider="yfinance"), timeout=0.5, span=False))
    assert checks["bars"].status == "unreachable"
    assert "timed out" in checks["bars"].detail or "no answer within" in checks["bars"].detail


@pytest.mark.usefixtures("clean_settings")
def test_llm_deployments_are_probed_and_their_keys_never_shown(llm_server: ScriptedLLM) -> None:
    deployments = [
        {"model_name": "local", "model": "openai/scripted", "api_base": llm_server.url, "api_key": SECRET},
        {"model_name": "gone", "model": "openai/other", "api_base": f"http://127.0.0.1:{_closed_port()}/v1"},
    ]
    settings = Settings(
        llm_model="local", llm_fallbacks="gone", llm_deployments=deployments, llm_num_retries=0
    )
    diagnosis = doctor.diagnose(settings=settings, timeout=2.0, span=False)
    checks = _by_name(diagnosis)
    assert checks["llm local"].status == "ok" and "key set" in checks["llm local"].detail
    assert checks["llm gone"].status == "unreachable" and "key not set" in checks["llm gone"].detail
    assert [c.name for c in diagnosis.failing] == ["llm gone"]
    assert SECRET not in json.dumps(diagnosis.as_dict())


@pytest.mark.usefixtures("clean_settings")
def test_a_folder_that_does_not_exist_is_misconfigured(tmp_path: Path) -> None:
    settings = Settings(data_provider="csv", data_dir=tmp_path / "no-such-folder")
    checks = _by_name(doctor.diagnose(settings=settings, span=False))
    assert checks["bars"].status == "misconfigured" and checks["bars"].failed


def _cli(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("FINAGENT_")}
    clean |= {"FINAGENT_SERVICE_STATE_DIR": str(tmp_path / "state"), **env}
    return subprocess.run(
        [FINAGENT, "doctor", *args],
        env=clean,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_command_exits_0_when_everything_configured_answers(tmp_path: Path) -> None:
    text = _cli(tmp_path)
    assert text.returncode == 0, text.stderr
    assert "everything configured is reachable" in text.stdout and "AAPL FB GOOG IBM MSFT" in text.stdout
    as_json = _cli(tmp_path, "--json")
    assert as_json.returncode == 0 and json.loads(as_json.stdout)["ok"] is True


def test_the_command_exits_3_and_masks_the_password_when_the_broker_is_down(tmp_path: Path) -> None:
    broker = f"redis://:{SECRET}@127.0.0.1:{_closed_port()}/0"
    proc: Callable[..., subprocess.CompletedProcess[str]] = _cli
    text = proc(tmp_path, "--timeout", "2", FINAGENT_SERVICE_BROKER_URL=broker)
    assert text.returncode == 3 and "failing: broker" in text.stdout
    assert SECRET not in text.stdout + text.stderr
    as_json = proc(tmp_path, "--json", "--timeout", "2", FINAGENT_SERVICE_BROKER_URL=broker)
    assert as_json.returncode == 3 and json.loads(as_json.stdout)["failing"] == ["broker"]
