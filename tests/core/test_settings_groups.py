"""The grouped settings keep every flat environment name and keyword argument, and the codemod
rewrites flat reads to grouped ones (core/settings/__init__.py, core/settings/codemod.py)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import SecretStr, ValidationError

from core.settings import GROUPS, Settings, flat_fields, get_settings, grouped_attributes
from core.settings.codemod import rewrite_source

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.usefixtures("clean_settings")


def test_every_field_is_in_exactly_one_group() -> None:
    counted = sum(len(model.model_fields) for model in GROUPS.values())
    assert len(flat_fields()) == counted  # a name in two groups would collapse here
    assert flat_fields()["csp_delta_min"] == ("options", "csp_delta_min")
    assert flat_fields()["llm_api_key"] == ("llm", "llm_api_key")
    assert not set(GROUPS) & set(flat_fields()), "a group named like a field shadows its variable"


def test_flat_environment_names_land_in_their_groups(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FINAGENT_LLM_MODEL", "openai/gpt-4o-mini")
    monkeypatch.setenv("FINAGENT_CSP_DELTA_MIN", "0.2")
    monkeypatch.setenv("FINAGENT_BROKER_URL", "redis://127.0.0.1:6379/0")
    monkeypatch.setenv("FINAGENT_ALPACA_API_KEY", "PKTEST1234567890")
    monkeypatch.setenv("FINAGENT_TASK_MAX_RETRIES", "7")
    monkeypatch.setenv("FINAGENT_LLM_DEPLOYMENTS", json.dumps([{"model_name": "m", "model": "openai/x"}]))
    s = Settings()
    assert s.llm.llm_model == "openai/gpt-4o-mini"
    assert s.options.csp_delta_min == 0.2
    assert s.service.mode == "service"
    assert s.service.shared_redis_url == "redis://127.0.0.1:6379/0"
    assert isinstance(s.broker.alpaca_api_key, SecretStr)
    assert s.broker.alpaca_api_key.get_secret_value() == "PKTEST1234567890"
    assert s.durability.task_max_retries == 7
    assert [d.model_name for d in s.llm.llm_deployments] == ["m"]


def test_dotenv_is_read_by_flat_names_and_the_environment_wins(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / ".env").write_text("FINAGENT_CSP_DTE_MAX=60\nFINAGENT_API_PORT=8100\n", encoding="utf-8")
    monkeypatch.setenv("FINAGENT_API_PORT", "8200")
    s = Settings()  # clean_settings made tmp_path the working directory
    assert s.options.csp_dte_max == 60
    assert s.api.api_port == 8200
    assert Settings(_env_file=None).options.csp_dte_max == 45


def test_keyword_arguments_flat_or_nested_outrank_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FINAGENT_LLM_MODEL", "from-env")
    monkeypatch.setenv("FINAGENT_LLM_TIMEOUT", "9")
    assert Settings(llm_model="flat").llm.llm_model == "flat"
    nested = Settings(llm={"llm_model": "nested"})
    assert nested.llm.llm_model == "nested"
    assert nested.llm.llm_timeout == 9.0  # the rest of the group still comes from the environment
    both = Settings(llm={"llm_model": "nested"}, llm_model="flat")
    assert both.llm.llm_model == "nested"


def test_validators_and_constraints_still_apply() -> None:
    with pytest.raises(ValidationError, match="FINAGENT_VISIBILITY_TIMEOUT must exceed"):
        Settings(task_time_limit=400)
    with pytest.raises(ValidationError, match="FINAGENT_DATA_PROVIDER must be"):
        Settings(data_provider="nope")
    with pytest.raises(ValidationError, match="LLM time arithmetic"):
        Settings(llm_model="m", llm_timeout=60)
    with pytest.raises(ValidationError):
        Settings(csp_delta_min=1.5)  # lt=1
    with pytest.raises(ValidationError):
        Settings(options={"no_such_field": 1})  # a nested group refuses unknown keys


def test_model_copy_takes_flat_keys_without_touching_the_original() -> None:
    s = Settings()
    copy = s.model_copy(update={"broker_url": "amqp://guest:guest@127.0.0.1:5672/x", "llm_budget_usd": 3.0})
    assert copy.service.broker_url == "amqp://guest:guest@127.0.0.1:5672/x"
    assert copy.llm.llm_budget_usd == 3.0
    assert s.service.broker_url is None and s.llm.llm_budget_usd == 1.0
    assert copy.options is s.options  # untouched groups are shared, as BaseModel.model_copy does


def test_no_flat_attribute_fallback() -> None:
    s = Settings()
    flat = "llm_model"  # a variable: the codemod rewrites literal names on a settings receiver
    assert not hasattr(s, flat)
    with pytest.raises(AttributeError):
        getattr(s, flat)
    assert s.llm_stage_time_budget == 100.0  # 120 s soft limit - 20 s reserve, across groups


def test_get_settings_is_cached_until_cleared(monkeypatch: pytest.MonkeyPatch) -> None:
    first = get_settings()
    monkeypatch.setenv("FINAGENT_LLM_MODEL", "later")
    assert get_settings() is first and first.llm.llm_model is None
    get_settings.cache_clear()
    assert get_settings().llm.llm_model == "later"


SAMPLE = """\
from core.settings import Settings, get_settings


def f(cfg: Settings, state) -> object:
    s = get_settings()
    x = settings.llm_model, s.csp_delta_min, cfg.broker_url, get_settings().mode
    y = ctx.settings.lease_seconds + state.max_iterations
    getattr(settings, "llm_timeout")
    monkeypatch.setattr(cfg, "llm_model", "m")
    return settings.llm.llm_model, "é", cfg.service.broker_url
"""

EXPECTED = """\
from core.settings import Settings, get_settings


def f(cfg: Settings, state) -> object:
    s = get_settings()
    x = settings.llm.llm_model, s.options.csp_delta_min, cfg.service.broker_url, get_settings().service.mode
    y = ctx.settings.durability.lease_seconds + state.max_iterations
    getattr(settings.llm, "llm_timeout")
    monkeypatch.setattr(cfg.llm, "llm_model", "m")
    return settings.llm.llm_model, "é", cfg.service.broker_url
"""


def test_the_codemod_rewrites_known_receivers_and_reports_the_rest() -> None:
    new, result = rewrite_source(SAMPLE.encode(), Path("sample.py"))
    assert new.decode() == EXPECTED
    assert result.edits == 7
    assert len(result.unresolved) == 1 and "state.max_iterations" in result.unresolved[0]
    again, second = rewrite_source(new, Path("sample.py"))
    assert again == new and second.edits == 0  # idempotent


def test_grouped_attributes_include_group_properties() -> None:
    attrs = grouped_attributes()
    assert attrs["effective_database_url"] == "service"
    assert attrs["llm_worst_answer_seconds"] == "llm"
    assert "llm_stage_time_budget" not in attrs  # a Settings property: spans two groups


def test_the_repository_has_no_flat_settings_read_left() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "core.settings.codemod", "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:]


def test_a_plan_names_an_existing_settings_group() -> None:
    from core.plans import PLANS

    named = {spec.settings_group for spec in PLANS} - {None}
    assert named and named <= set(GROUPS)


def test_the_codemod_reports_flat_reads_inside_strings_without_editing_them() -> None:
    source = b'"""Reads ``settings.llm_model``."""\nCODE = "print(settings.broker_url)"\n'
    new, result = rewrite_source(source, Path("doc.py"))
    assert new == source and result.edits == 0
    found = [line.split(": ")[1] for line in result.unresolved]
    assert found == ["settings.llm_model", "settings.broker_url"]


def test_the_example_environment_file_still_configures_the_groups(tmp_path: Path) -> None:
    """Every variable .env.example names (active or commented out) is a setting, and its active
    lines, used as a ``.env``, land in their groups."""
    text = (ROOT / ".env.example").read_text(encoding="utf-8")
    named = set(re.findall(r"^#?\s*(FINAGENT_[A-Z0-9_]+)=", text, flags=re.M))
    assert named and named <= {f"FINAGENT_{name.upper()}" for name in flat_fields()}
    active = [line for line in text.splitlines() if line.startswith("FINAGENT_")]
    (tmp_path / ".env").write_text("\n".join(active) + "\n", encoding="utf-8")
    s = Settings()  # clean_settings made tmp_path the working directory
    values = dict(line.split("=", 1) for line in active)
    assert s.service.broker_url == values["FINAGENT_BROKER_URL"]
    assert s.service.database_url == values["FINAGENT_DATABASE_URL"]
    assert s.data.data_provider == values["FINAGENT_DATA_PROVIDER"]
