"""Router deployments against two scripted OpenAI-compatible servers: a primary that is dead,
rate-limited or failing, and a healthy fallback on another address (its own api_base and key).

Every test counts the requests the servers really received: a dead or failing primary must be
skipped while it cools down, not retried on every call.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import ValidationError

from agents.llm.config import Deployment, LLMConfig, Role, RouterConfigError, llm_config, load_router_file
from agents.llm.runner import run_sync
from agents.llm.session import LLMError, LLMSession
from core.settings import Settings
from tests.llm.server import ScriptedLLM, chat, error

PRIMARY_KEY = "sk-primary-secret-111"
BACKUP_KEY = "sk-backup-secret-222"
MESSAGES = [{"role": "user", "content": "hello"}]


@pytest.fixture
def backup() -> Iterator[ScriptedLLM]:
    server = ScriptedLLM().start()
    yield server
    server.stop()


def _dead_url() -> str:
    """An address where nothing listens (connection refused): a port just released."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


class _Sleeps:
    """Injected backoff sleep: records each pause (s) and really waits it (cooldowns are timed)."""

    def __init__(self) -> None:
        self.pauses: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.pauses.append(seconds)
        await asyncio.sleep(seconds)


def _config(primary_url: str, backup_url: str, **overrides: object) -> LLMConfig:
    fields: dict[str, object] = {
        "models": {Role.TECHNICAL: "primary"},
        "fallbacks": ("backup",),
        "deployments": (
            Deployment(name="primary", model="openai/p", api_base=primary_url, api_key=PRIMARY_KEY),
            Deployment(name="backup", model="openai/b", api_base=backup_url, api_key=BACKUP_KEY),
        ),
        "num_retries": 1,
        "retry_backoff": 0.01,
        "allowed_fails": 1,
        "cooldown_time": 60.0,
        **overrides,
    }
    return LLMConfig(**fields)  # type: ignore[arg-type]


def _call(config: LLMConfig, sleeps: _Sleeps | None = None) -> tuple[LLMSession, object]:
    session = LLMSession(config=config, analysis_id="a-router", stage="analysis")
    if sleeps is not None:
        session.sleep = sleeps
    completion = run_sync(session.complete(agent="technical", role=Role.TECHNICAL, messages=MESSAGES))
    return session, completion


def test_a_dead_primary_falls_back_and_is_skipped_while_it_cools_down(backup: ScriptedLLM) -> None:
    backup.script("b", [chat("from backup")] * 3)
    config = _config(_dead_url(), backup.url)

    first, answer = _call(config)
    second, again = _call(config)
    third, _ = _call(config)

    assert answer.content == "from backup" and answer.model == "backup"  # type: ignore[attr-defined]
    # first call: the primary failed twice (1 + 1 retry, then cooled down), the backup answered
    assert [(r["model"], r["status"]) for r in first.rows] == [
        ("primary", "error"),
        ("primary", "error"),
        ("backup", "success"),
    ]
    # later calls: no attempt on the primary at all, straight to the backup
    assert [r["model"] for r in second.rows] == ["backup"] and [r["model"] for r in third.rows] == ["backup"]
    assert second.skipped and "cooldown" in second.skipped[0]
    assert again.content == "from backup"  # type: ignore[attr-defined]
    assert backup.models_called() == ["b", "b", "b"]


def test_a_500_primary_falls_back_and_gets_no_requests_during_cooldown(
    llm_server: ScriptedLLM, backup: ScriptedLLM
) -> None:
    llm_server.script("p", [error(500), error(500), error(500), error(500)])
    backup.script("b", [chat("ok")] * 3)
    config = _config(llm_server.url, backup.url)

    for _ in range(3):
        _, completion = _call(config)
        assert completion.model == "backup"  # type: ignore[attr-defined]

    assert llm_server.models_called() == ["p", "p"]  # two attempts on the first call, then cooldown
    assert backup.models_called() == ["b", "b", "b"]


def test_a_429_is_retried_only_after_its_retry_after(llm_server: ScriptedLLM, backup: ScriptedLLM) -> None:
    llm_server.script("p", [error(429, "slow down", retry_after="1"), chat("primary after pause")])
    sleeps = _Sleeps()

    session, completion = _call(_config(llm_server.url, backup.url), sleeps)

    assert completion.content == "primary after pause"  # type: ignore[attr-defined]
    assert len(sleeps.pauses) == 1 and sleeps.pauses[0] >= 1.0  # at least Retry-After, not 0.01 s
    assert llm_server.models_called() == ["p", "p"] and backup.requests == []
    assert "RateLimitError" in session.rows[0]["error"] and "\n" not in session.rows[0]["error"]


def test_a_429_asking_for_a_long_pause_goes_to_the_fallback_at_once(
    llm_server: ScriptedLLM, backup: ScriptedLLM
) -> None:
    llm_server.script("p", [error(429, "come back later", retry_after="120")])
    backup.script("b", [chat("from backup")])
    sleeps = _Sleeps()

    _, completion = _call(_config(llm_server.url, backup.url), sleeps)

    assert completion.model == "backup" and sleeps.pauses == []  # type: ignore[attr-defined]
    assert llm_server.models_called() == ["p"]


def test_both_failing_raises_with_one_line_errors(llm_server: ScriptedLLM) -> None:
    llm_server.script("p", [error(401, "bad key")])
    config = _config(llm_server.url, _dead_url(), num_retries=0)
    with pytest.raises(LLMError) as info:
        _call(config)
    assert len(info.value.errors) == 2 and all("\n" not in e for e in info.value.errors)


def test_keys_reach_each_server_but_never_rows_or_logs(
    llm_server: ScriptedLLM, backup: ScriptedLLM, caplog: pytest.LogCaptureFixture
) -> None:
    llm_server.script("p", [error(500, f"upstream said api_key={PRIMARY_KEY}")])
    backup.script("b", [chat("ok")])
    with caplog.at_level(logging.INFO):
        session, _ = _call(_config(llm_server.url, backup.url, num_retries=0))
    assert llm_server.headers[0]["authorization"] == f"Bearer {PRIMARY_KEY}"
    assert backup.headers[0]["authorization"] == f"Bearer {BACKUP_KEY}"
    dumped = json.dumps(session.rows, default=str) + json.dumps(
        [getattr(r, "payload", r.getMessage()) for r in caplog.records], default=str
    )
    assert PRIMARY_KEY not in dumped and BACKUP_KEY not in dumped


ROUTER_YAML = """
model_list:
  - model_name: primary
    litellm_params:
      model: openai/p
      api_base: {primary}
      api_key: os.environ/FINAGENT_TEST_PRIMARY_KEY
  - model_name: backup
    litellm_params:
      model: openai/b
      api_base: {backup}
      api_key: {backup_key}
      timeout: 5
router_settings:
  fallbacks: [{{primary: [backup]}}]
  allowed_fails: 0
  cooldown_time: 30
"""

ROUTER_TOML = """
[[model_list]]
model_name = "primary"
[model_list.litellm_params]
model = "openai/p"
api_base = "{primary}"
api_key = "os.environ/FINAGENT_TEST_PRIMARY_KEY"

[[model_list]]
model_name = "backup"
litellm_params = {{ model = "openai/b", api_base = "{backup}", api_key = "{backup_key}" }}

[router_settings]
fallbacks = [{{ primary = ["backup"] }}]
allowed_fails = 0
cooldown_time = 30
"""


@pytest.mark.parametrize(("suffix", "template"), [(".yaml", ROUTER_YAML), (".toml", ROUTER_TOML)])
def test_the_router_file_gives_each_deployment_its_server_and_its_fallbacks(
    suffix: str,
    template: str,
    tmp_path: Path,
    llm_server: ScriptedLLM,
    backup: ScriptedLLM,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FINAGENT_TEST_PRIMARY_KEY", PRIMARY_KEY)
    path = tmp_path / f"router{suffix}"
    path.write_text(template.format(primary=llm_server.url, backup=backup.url, backup_key=BACKUP_KEY))
    settings = Settings(_env_file=None, llm_model="primary", llm_router_file=path, llm_num_retries=0)  # type: ignore[call-arg]
    config = llm_config(settings=settings)
    assert config is not None
    assert config.chain_for(Role.SYNTHESIS) == ["primary", "backup"]  # fallback from the file only
    assert config.allowed_fails == 0 and config.cooldown_time == 30
    assert PRIMARY_KEY not in json.dumps(config.public()) and PRIMARY_KEY not in repr(config)

    llm_server.script("p", [error(503)])
    backup.script("b", [chat("b1"), chat("b2")])
    first, _ = _call(config)
    second, _ = _call(config)

    assert [r["model"] for r in first.rows] == ["primary", "backup"]
    assert [r["model"] for r in second.rows] == ["backup"]  # allowed_fails 0: cooled down at once
    assert llm_server.headers[0]["authorization"] == f"Bearer {PRIMARY_KEY}"
    assert backup.headers[0]["authorization"] == f"Bearer {BACKUP_KEY}"


def test_a_malformed_router_file_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bad = tmp_path / "router.yaml"
    bad.write_text("model_list:\n  - model_name: x\n")
    with pytest.raises(
        RouterConfigError, match=r"model_list\[0\]: needs model_name and litellm_params.model"
    ):
        load_router_file(bad)
    dup = tmp_path / "dup.toml"
    dup.write_text(
        '[[model_list]]\nmodel_name = "a"\nlitellm_params = { model = "openai/a" }\n'
        '[[model_list]]\nmodel_name = "a"\nlitellm_params = { model = "openai/b" }\n'
    )
    settings = Settings(_env_file=None, llm_model="a", llm_router_file=dup)  # type: ignore[call-arg]
    with pytest.raises(RouterConfigError, match="defined twice"):
        llm_config(settings=settings)
    unset = tmp_path / "unset.yaml"
    unset.write_text(
        "model_list:\n  - model_name: a\n"
        "    litellm_params: {model: openai/a, api_key: os.environ/NOPE_UNSET_1}\n"
    )
    monkeypatch.delenv("NOPE_UNSET_1", raising=False)
    with pytest.raises(RouterConfigError, match="NOPE_UNSET_1, which is unset"):
        load_router_file(unset)
    (tmp_path / "router.json").write_text("{}")
    with pytest.raises(RouterConfigError, match=r"expected \.yaml"):
        load_router_file(tmp_path / "router.json")


def test_deployments_from_settings_json(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "FINAGENT_LLM_DEPLOYMENTS",
        json.dumps(
            [{"model_name": "local", "model": "openai/qwen", "api_base": "http://h:1/v1", "api_key": "k1"}]
        ),
    )
    settings = Settings(_env_file=None, llm_model="local", llm_fallbacks="openai/other", llm_timeout=5)  # type: ignore[call-arg]
    assert "k1" not in repr(settings)
    config = llm_config(settings=settings)
    assert config is not None
    local = config.deployment("local")
    assert (local.model, local.api_base, local.api_key) == ("openai/qwen", "http://h:1/v1", "k1")
    other = config.deployment("openai/other")  # not listed: the global api_base/api_key (unset here)
    assert (other.model, other.api_base, other.api_key) == ("openai/other", None, None)


def test_the_documented_example_file_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.conftest import REPO_ROOT

    monkeypatch.setenv("OLLAMA_PROXY_KEY", "k-ollama")
    monkeypatch.setenv("OPENAI_API_KEY", "k-openai")
    # three deployments (local-small's own 30 s timeout, then 15 s each), one attempt each:
    # 2 calls x (30 + 15 + 15) = 120 s <= soft limit 150 - reserve 20 = 130 s
    settings = Settings(  # type: ignore[call-arg]
        _env_file=None,
        llm_model="local-small",
        llm_router_file=REPO_ROOT / "docs" / "llm-router.example.yaml",
        llm_num_retries=0,
        durability_task_soft_time_limit=150,
        durability_task_time_limit=200,
    )
    assert settings.llm.worst_answer_seconds == 120.0
    config = llm_config(settings=settings)
    assert config is not None
    assert config.chain_for(Role.TECHNICAL) == ["local-small", "local-big", "hosted"]
    big = config.deployment("local-big")
    assert (big.api_base, big.api_key) == ("http://10.0.0.12:11434/v1", "k-ollama")
    assert config.deployment("hosted").api_base is None and config.allowed_fails == 1


def test_the_start_up_time_check_counts_the_router_file_fallbacks_and_timeouts() -> None:
    from tests.conftest import REPO_ROOT

    # defaults (3 attempts, backoff 1 + 2 s): 2 x ((3 x 30 + 3) + (3 x 15 + 3) + (3 x 15 + 3))
    # = 2 x (93 + 48 + 48) = 378 s > 120 - 20 = 100 s, although FINAGENT_LLM_FALLBACKS is empty
    with pytest.raises(ValidationError) as info:
        Settings(  # type: ignore[call-arg]
            _env_file=None,
            llm_model="local-small",
            llm_router_file=REPO_ROOT / "docs" / "llm-router.example.yaml",
        )
    message = str(info.value)
    assert "378 s" in message and "local-small -> local-big -> hosted" in message


def test_a_deployment_timeout_of_the_router_file_cuts_its_requests(
    tmp_path: Path, llm_server: ScriptedLLM
) -> None:
    slow = chat("late")
    slow.delay = 4.0
    llm_server.script("slow", [slow])
    path = tmp_path / "router.yaml"
    path.write_text(
        "model_list:\n"
        "  - model_name: quick\n"
        f"    litellm_params: {{model: openai/slow, api_base: '{llm_server.url}', api_key: k, timeout: 1}}\n"
    )
    settings = Settings(_env_file=None, llm_model="quick", llm_router_file=path, llm_num_retries=0)  # type: ignore[call-arg]
    config = llm_config(settings=settings)
    assert config is not None and config.timeout == 15.0  # the global timeout stays 15 s
    session = LLMSession(config=config, analysis_id="a-dt", stage="analysis")
    with pytest.raises(LLMError):
        run_sync(
            session.complete(
                agent="technical", role=Role.TECHNICAL, messages=[{"role": "user", "content": "x"}]
            )
        )
    # cut at the deployment's 1 s, not at 15 s or at the 4 s reply
    assert len(session.rows) == 1 and "Timeout" in session.rows[0]["error"]
    assert 900 <= session.rows[0]["latency_ms"] < 3000
