"""Every setting is named from its group and field: ``settings.<group>.<field>``, the variable
``FINAGENT_<GROUP>_<FIELD>``, the keyword ``<group>_<field>``; the old flat names are still read
with one warning per process (core/settings/__init__.py, core/settings/legacy.py)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from pydantic import SecretStr, ValidationError

from core.settings import GROUPS, Settings, env_name, flat_fields, get_settings, legacy

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.usefixtures("clean_settings")


@pytest.fixture(autouse=True)
def _fresh_warnings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts as a fresh process would: no old name warned about yet."""
    monkeypatch.setattr(legacy, "_warned", set())


def test_every_field_is_in_exactly_one_group_and_none_repeats_its_group() -> None:
    counted = sum(len(model.model_fields) for model in GROUPS.values())
    assert len(flat_fields()) == counted  # two settings with one flat name would collapse here
    assert flat_fields()["options_delta_min"] == ("options", "delta_min")
    assert flat_fields()["llm_api_key"] == ("llm", "api_key")
    assert flat_fields()["durability_task_time_limit"] == ("durability", "task_time_limit")
    for group, model in GROUPS.items():
        prefixes = (f"{group}_", f"{group.removesuffix('s')}_")
        stutter = [name for name in model.model_fields if name.startswith(prefixes)]
        assert not stutter, f"{group} fields repeat the group's name: {stutter}"
    assert not [name for name in GROUPS["options"].model_fields if name.startswith("csp_")]
    assert env_name("options", "min_weekly_roc") == "FINAGENT_OPTIONS_MIN_WEEKLY_ROC"


def test_environment_names_land_in_their_groups(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FINAGENT_LLM_MODEL", "openai/gpt-4o-mini")
    monkeypatch.setenv("FINAGENT_OPTIONS_DELTA_MIN", "0.2")
    monkeypatch.setenv("FINAGENT_SERVICE_BROKER_URL", "redis://127.0.0.1:6379/0")
    monkeypatch.setenv("FINAGENT_BROKER_ALPACA_API_KEY", "PKTEST1234567890")
    monkeypatch.setenv("FINAGENT_DURABILITY_TASK_MAX_RETRIES", "7")
    monkeypatch.setenv("FINAGENT_LLM_DEPLOYMENTS", json.dumps([{"model_name": "m", "model": "openai/x"}]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no old name here: no warning
        s = Settings()
    assert s.llm.model == "openai/gpt-4o-mini"
    assert s.options.delta_min == 0.2
    assert s.service.mode == "service"
    assert s.service.shared_redis_url == "redis://127.0.0.1:6379/0"
    assert isinstance(s.broker.alpaca_api_key, SecretStr)
    assert s.broker.alpaca_api_key.get_secret_value() == "PKTEST1234567890"
    assert s.durability.task_max_retries == 7
    assert [d.model_name for d in s.llm.deployments] == ["m"]


def test_old_environment_names_work_with_one_warning_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FINAGENT_CSP_MIN_WEEKLY_ROC", "0.5")
    monkeypatch.setenv("FINAGENT_TASK_MAX_RETRIES", "6")
    monkeypatch.setenv("FINAGENT_LLM_TIMEOUT", "9")  # unchanged name: no warning for it
    with pytest.warns(FutureWarning) as caught:
        s = Settings()
    assert s.options.min_weekly_roc == 0.5 and s.durability.task_max_retries == 6 and s.llm.timeout == 9.0
    assert len(caught) == 1
    text = str(caught[0].message)
    assert "FINAGENT_CSP_MIN_WEEKLY_ROC -> FINAGENT_OPTIONS_MIN_WEEKLY_ROC" in text
    assert "FINAGENT_TASK_MAX_RETRIES -> FINAGENT_DURABILITY_TASK_MAX_RETRIES" in text
    assert "FINAGENT_LLM_TIMEOUT" not in text
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the second construction in this process stays quiet
        assert Settings().options.min_weekly_roc == 0.5


def test_a_new_name_wins_over_its_old_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FINAGENT_CSP_DTE_MAX", "30")
    monkeypatch.setenv("FINAGENT_OPTIONS_DTE_MAX", "50")
    with pytest.warns(FutureWarning, match="FINAGENT_CSP_DTE_MAX -> FINAGENT_OPTIONS_DTE_MAX"):
        assert Settings().options.dte_max == 50


def test_old_keyword_names_still_work_with_the_warning() -> None:
    with pytest.warns(FutureWarning, match="FINAGENT_STATE_DIR -> FINAGENT_SERVICE_STATE_DIR"):
        s = Settings(state_dir=Path("/tmp/x"), csp_dte_min=3)
    assert s.service.state_dir == Path("/tmp/x") and s.options.dte_min == 3


def test_dotenv_is_read_by_the_new_and_old_names_and_the_environment_wins(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / ".env").write_text(
        "FINAGENT_OPTIONS_DTE_MAX=60\nFINAGENT_API_PORT=8100\nFINAGENT_WATCHLIST_TICK_SECONDS=33\n",
        encoding="utf-8",
    )
    monkeypatch.setenv("FINAGENT_API_PORT", "8200")
    with pytest.warns(FutureWarning, match="FINAGENT_WATCHLIST_TICK_SECONDS -> FINAGENT_WATCHLISTS_TICK"):
        s = Settings()  # clean_settings made tmp_path the working directory
    assert s.options.dte_max == 60
    assert s.api.port == 8200
    assert s.watchlists.tick_seconds == 33
    assert Settings(_env_file=None).options.dte_max == 45


def test_keyword_arguments_flat_or_nested_outrank_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FINAGENT_LLM_MODEL", "from-env")
    monkeypatch.setenv("FINAGENT_LLM_TIMEOUT", "9")
    assert Settings(llm_model="flat").llm.model == "flat"
    nested = Settings(llm={"model": "nested"})
    assert nested.llm.model == "nested"
    assert nested.llm.timeout == 9.0  # the rest of the group still comes from the environment
    both = Settings(llm={"model": "nested"}, llm_model="flat")
    assert both.llm.model == "nested"


def test_validators_and_constraints_still_apply() -> None:
    with pytest.raises(ValidationError, match="FINAGENT_DURABILITY_VISIBILITY_TIMEOUT must exceed"):
        Settings(durability_task_time_limit=400)
    with pytest.raises(ValidationError, match="FINAGENT_DATA_PROVIDER must be"):
        Settings(data_provider="nope")
    with pytest.raises(ValidationError, match="LLM time arithmetic"):
        Settings(llm_model="m", llm_timeout=60)
    with pytest.raises(ValidationError):
        Settings(options_delta_min=1.5)  # lt=1
    with pytest.raises(ValidationError):
        Settings(options={"no_such_field": 1})  # a nested group refuses unknown keys
    with pytest.raises(ValidationError):
        Settings(options={"csp_delta_min": 0.2})  # old names are flat only, never inside a group


def test_model_copy_takes_flat_keys_without_touching_the_original() -> None:
    s = Settings()
    copy = s.model_copy(
        update={"service_broker_url": "amqp://guest:guest@127.0.0.1:5672/x", "llm_budget_usd": 3.0}
    )
    assert copy.service.broker_url == "amqp://guest:guest@127.0.0.1:5672/x"
    assert copy.llm.budget_usd == 3.0
    assert s.service.broker_url is None and s.llm.budget_usd == 1.0
    assert copy.options is s.options  # untouched groups are shared, as BaseModel.model_copy does
    with pytest.warns(FutureWarning, match="FINAGENT_LEASE_SECONDS -> FINAGENT_DURABILITY_LEASE_SECONDS"):
        assert s.model_copy(update={"lease_seconds": 900}).durability.lease_seconds == 900


def test_no_flat_attribute_fallback() -> None:
    s = Settings()
    for flat in ("llm_model", "model"):
        assert not hasattr(s, flat)
    assert s.llm_stage_time_budget == 100.0  # 120 s soft limit - 20 s reserve, across groups


def test_get_settings_is_cached_until_cleared(monkeypatch: pytest.MonkeyPatch) -> None:
    first = get_settings()
    monkeypatch.setenv("FINAGENT_LLM_MODEL", "later")
    assert get_settings() is first and first.llm.model is None
    get_settings.cache_clear()
    assert get_settings().llm.model == "later"


def test_a_plan_names_an_existing_settings_group() -> None:
    from core.plans import PLANS

    named = {spec.settings_group for spec in PLANS} - {None}
    assert named and named <= set(GROUPS)


def test_a_process_warns_once_about_old_names() -> None:
    """A fresh interpreter with two old variables builds its settings three times and prints
    one warning naming both."""
    code = (
        "from core.settings import Settings\n"
        "for _ in range(3):\n"
        "    s = Settings(_env_file=None)\n"
        "print(s.options.fill, s.api.max_in_flight)\n"
    )
    env = {"PATH": "/usr/bin:/bin", "FINAGENT_CSP_FILL": "bid", "FINAGENT_API_MAX_IN_FLIGHT": "7"}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    assert done.stdout.split() == ["bid", "7"]
    assert done.stderr.count("FutureWarning") == 1, done.stderr
    assert "FINAGENT_CSP_FILL -> FINAGENT_OPTIONS_FILL" in done.stderr
    assert "FINAGENT_API_MAX_IN_FLIGHT" not in done.stderr  # its name did not change


def test_the_example_environment_file_configures_the_groups(tmp_path: Path) -> None:
    """Every variable .env.example names (active or commented out) is a current setting, and its
    active lines, used as a ``.env``, land in their groups."""
    text = (ROOT / ".env.example").read_text(encoding="utf-8")
    named = set(re.findall(r"^#?\s*(FINAGENT_[A-Z0-9_]+)=", text, flags=re.M))
    assert named and named <= {f"FINAGENT_{name.upper()}" for name in flat_fields()}
    active = [line for line in text.splitlines() if line.startswith("FINAGENT_")]
    (tmp_path / ".env").write_text("\n".join(active) + "\n", encoding="utf-8")
    s = Settings()  # clean_settings made tmp_path the working directory
    values = dict(line.split("=", 1) for line in active)
    assert s.service.broker_url == values["FINAGENT_SERVICE_BROKER_URL"]
    assert s.service.database_url == values["FINAGENT_SERVICE_DATABASE_URL"]
    assert s.data.provider == values["FINAGENT_DATA_PROVIDER"]
