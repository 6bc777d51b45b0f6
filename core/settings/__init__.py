"""The product's configuration: one pydantic-settings ``Settings`` with a field per area.

Every tunable has a safe default and an environment variable. The embedded default needs no
variable at all: no broker URL means an in-process Celery worker on kombu's in-memory transport
and a SQLite file, so ``finagent analyze AAPL`` works on a fresh machine.

The settings are grouped by area, each group a pydantic model in its own module of this
package: ``settings.service`` (:mod:`core.settings.service`), ``.durability``, ``.data``,
``.analysis``, ``.api``, ``.watchlists``, ``.broker``, ``.options`` and ``.llm``. Code reads
``settings.<group>.<field>`` (``settings.llm.llm_model``); the field keeps its old flat name,
so the environment variable stays ``FINAGENT_`` + the field name in upper case
(``FINAGENT_LLM_MODEL``), the same variable it always was. Constructors accept the flat names
as well (``Settings(llm_model="x")``), and the groups nested (``Settings(llm={"llm_model": "x"})``);
:meth:`Settings.model_copy` maps flat ``update`` keys the same way. :func:`flat_fields` is the
map from a flat name to its group, for the secret masker and the configuration document.

There is deliberately no flat attribute fallback (``settings.llm_model``): a leftover flat read
fails type checking (mypy knows the groups), and ``python -m core.settings.codemod`` rewrites
them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import cache, lru_cache
from typing import Any

from pydantic import BaseModel, Field, create_model, model_validator
from pydantic_settings import (
    BaseSettings,
    DotEnvSettingsSource,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from core.settings.analysis import AnalysisSettings
from core.settings.api import ApiSettings
from core.settings.broker import BrokerSettings
from core.settings.data import DATA_PROVIDER_NAMES, DataSettings
from core.settings.durability import DurabilitySettings
from core.settings.llm import LLM_CALLS_PER_ANSWER, LLMDeploymentSetting, LLMSettings
from core.settings.options import OptionsSettings
from core.settings.service import DEFAULT_STATE_DIR, ServiceSettings
from core.settings.watchlists import WatchlistSettings

# LiteLLM fetches a price map over the network at import unless this is set (https://docs.litellm.ai/docs/proxy/model_cost_map).
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

__all__ = [
    "DATA_PROVIDER_NAMES",
    "DEFAULT_STATE_DIR",
    "GROUPS",
    "LLM_CALLS_PER_ANSWER",
    "AnalysisSettings",
    "ApiSettings",
    "BrokerSettings",
    "DataSettings",
    "DurabilitySettings",
    "LLMDeploymentSetting",
    "LLMSettings",
    "OptionsSettings",
    "ServiceSettings",
    "Settings",
    "WatchlistSettings",
    "flat_fields",
    "get_settings",
    "grouped_attributes",
]

ENV_PREFIX = "FINAGENT_"

#: The groups in the order of docs/configuration.md: attribute name on ``Settings`` -> its model.
GROUPS: dict[str, type[BaseModel]] = {
    "service": ServiceSettings,
    "durability": DurabilitySettings,
    "data": DataSettings,
    "analysis": AnalysisSettings,
    "api": ApiSettings,
    "watchlists": WatchlistSettings,
    "broker": BrokerSettings,
    "options": OptionsSettings,
    "llm": LLMSettings,
}


@cache
def flat_fields() -> dict[str, tuple[str, str]]:
    """Every setting by its flat name (the environment name without ``FINAGENT_``, lower case)
    -> ``(group, field)``, in group order then field order. Raises nothing (a name in two
    groups is a programming error caught by ``tests/core/test_settings_groups.py``)."""
    return {name: (group, name) for group, model in GROUPS.items() for name in model.model_fields}


@cache
def grouped_attributes() -> dict[str, str]:
    """Flat attribute name -> group for everything code reads through a group: the fields and
    the public properties of each group model (``mode``, ``effective_database_url``, …). The
    codemod (:mod:`core.settings.codemod`) rewrites ``settings.<name>`` with it."""
    found = {name: group for name, (group, _) in flat_fields().items()}
    for group, model in GROUPS.items():
        for name, value in vars(model).items():
            if isinstance(value, property) and not name.startswith("_"):
                found[name] = group
    return found


class _FlatBase(BaseSettings):
    """Base of :func:`_flat_env_model` (the prefix and the ``.env`` file of :class:`Settings`)."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, env_file=".env", extra="ignore")


@cache
def _flat_env_model() -> type[BaseSettings]:
    """A settings class with every flat field (annotation as in its group, default ``None``):
    the shape the environment and ``.env`` sources read, so ``FINAGENT_LLM_MODEL`` stays the
    variable of ``llm.llm_model`` (complex fields such as ``llm_deployments`` are JSON-decoded
    by their annotation, as before)."""
    fields: dict[str, Any] = {}
    for name, (group, field) in flat_fields().items():
        fields[name] = (GROUPS[group].model_fields[field].annotation, None)
    return create_model("FlatEnvironment", __base__=_FlatBase, **fields)


#: ``FINAGENT_LLM_PROFILE=local-cpu``: a model served on local CPUs (docs/llm.md, "Local CPU
#: profile", gives the reasoning). Flat names; an explicitly given setting wins over each.
#: The nesting: LLM worst answer 2 calls x 1 model x 1 attempt x 180 s = 360 s <= soft limit
#: 420 - reserve 30 = 390 s; soft 420 < hard 480; hard 480 + backoff max 120 = 600 < visibility
#: 900; hard 480 < lease 600.
PROFILES: dict[str, dict[str, Any]] = {
    "local-cpu": {
        "llm_timeout": 180.0,
        "llm_num_retries": 0,
        "llm_retry_timeouts": False,
        "llm_deployment_concurrency": 1,
        "llm_allowed_fails": 1,
        "llm_cooldown_time": 120.0,
        "llm_time_reserve": 30.0,
        "llm_max_iterations": 0,
        "task_soft_time_limit": 420,
        "task_time_limit": 480,
        "task_retry_backoff_max": 120,
        "visibility_timeout": 900,
        "lease_seconds": 600,
    }
}


def apply_profile(data: dict[str, Any], *, fields: Mapping[str, tuple[str, str]]) -> dict[str, Any]:
    """``data`` (flat and nested settings keys) with the values of its ``llm_profile`` filled in
    where no value was given (flat or inside a nested group), then the profile's nesting checked.

    Raises:
        ValueError: unknown profile, or an explicit setting that breaks the nesting of the time
            limits (the message names the settings, their values and where each came from).
    """
    name = data.get("llm_profile")
    if name is None and isinstance(data.get("llm"), dict):
        name = data["llm"].get("llm_profile")
    if name is None:
        return data
    if name not in PROFILES:
        raise ValueError(f"FINAGENT_LLM_PROFILE={name!r}: unknown profile (known: {', '.join(PROFILES)})")

    def given(key: str) -> bool:
        group = data.get(fields[key][0])
        nested = group.model_dump(exclude_unset=True) if isinstance(group, BaseModel) else group
        return key in data or (isinstance(nested, dict) and key in nested)

    out = dict(data)
    for key, preset in PROFILES[name].items():
        if not given(key):
            out[key] = preset
    explicit = sorted(k for k in PROFILES[name] if given(k))

    def value(key: str) -> float:
        if key in out:
            return float(out[key])
        group = data.get(fields[key][0])
        nested = group.model_dump() if isinstance(group, BaseModel) else group or {}
        return float(nested[key])

    def where(*keys: str) -> str:
        return ", ".join(
            f"FINAGENT_{k.upper()}={value(k):g} ({'explicit' if k in explicit else 'profile'})" for k in keys
        )

    broken: list[str] = []
    worst = 2 * value("llm_timeout") * (value("llm_num_retries") + 1)
    if worst > value("task_soft_time_limit") - value("llm_time_reserve"):
        broken.append(
            "2 calls x (retries + 1) x timeout must fit the soft limit minus the reserve: "
            + where("llm_timeout", "llm_num_retries", "task_soft_time_limit", "llm_time_reserve")
        )
    if not value("task_soft_time_limit") < value("task_time_limit"):
        broken.append("soft limit < hard limit: " + where("task_soft_time_limit", "task_time_limit"))
    if not value("task_time_limit") + value("task_retry_backoff_max") < value("visibility_timeout"):
        broken.append(
            "hard limit + backoff max < visibility timeout: "
            + where("task_time_limit", "task_retry_backoff_max", "visibility_timeout")
        )
    if not value("task_time_limit") < value("lease_seconds"):
        broken.append("hard limit < lease: " + where("task_time_limit", "lease_seconds"))
    if broken:
        raise ValueError(
            f"FINAGENT_LLM_PROFILE={name}: the explicit settings break the nesting of the time limits: "
            + "; ".join(broken)
        )
    return out


def _longest(chains: list[tuple[str, ...]]) -> tuple[str, ...]:
    """The longest of ``chains`` (the first of equal length); ``()`` for none."""
    return max(chains, key=len, default=())


class Settings(BaseSettings):
    """Runtime configuration, read from ``FINAGENT_*`` environment variables (and ``.env``),
    one field per group (module docstring).

    Units: seconds for every timeout and countdown. Invariants between them (time limits and
    retry backoff below the Redis visibility timeout) are checked by the groups' validators and
    :meth:`_llm_time_arithmetic` (docs/design.md, "Celery configuration"). Invalid values raise
    ``pydantic.ValidationError`` at construction.
    """

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, env_file=".env", extra="ignore")

    service: ServiceSettings = Field(
        default_factory=ServiceSettings, description="Broker, database, state, logs, ports."
    )
    durability: DurabilitySettings = Field(
        default_factory=DurabilitySettings, description="Time limits, retries, leases, the sweeper."
    )
    data: DataSettings = Field(
        default_factory=DataSettings, description="Market data, fundamentals, news, tool retries."
    )
    analysis: AnalysisSettings = Field(
        default_factory=AnalysisSettings, description="Passes, indicator sandbox, scorecard."
    )
    api: ApiSettings = Field(default_factory=ApiSettings, description="HTTP gateway and its quotas.")
    watchlists: WatchlistSettings = Field(
        default_factory=WatchlistSettings, description="Watchlists, their schedule and quotas."
    )
    broker: BrokerSettings = Field(
        default_factory=BrokerSettings, description="Paper broker, fees, Alpaca market data."
    )
    options: OptionsSettings = Field(
        default_factory=OptionsSettings, description="Option chains and the CSP rules."
    )
    llm: LLMSettings = Field(default_factory=LLMSettings, description="LLM agents and budgets.")

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Read the environment and ``.env`` by the flat names (:func:`_flat_env_model`) with
        the options this construction was given (``_env_file=None`` etc.); keyword arguments
        still win over the environment, the environment over ``.env``."""
        flat = _flat_env_model()
        env = EnvSettingsSource(
            flat,
            case_sensitive=getattr(env_settings, "case_sensitive", None),
            env_prefix=getattr(env_settings, "env_prefix", None),
            env_ignore_empty=getattr(env_settings, "env_ignore_empty", None),
            env_parse_none_str=getattr(env_settings, "env_parse_none_str", None),
            env_parse_enums=getattr(env_settings, "env_parse_enums", None),
        )
        dotenv = DotEnvSettingsSource(
            flat,
            env_file=getattr(dotenv_settings, "env_file", None),
            env_file_encoding=getattr(dotenv_settings, "env_file_encoding", None),
            case_sensitive=getattr(dotenv_settings, "case_sensitive", None),
            env_prefix=getattr(dotenv_settings, "env_prefix", None),
            env_ignore_empty=getattr(dotenv_settings, "env_ignore_empty", None),
            env_parse_none_str=getattr(dotenv_settings, "env_parse_none_str", None),
            env_parse_enums=getattr(dotenv_settings, "env_parse_enums", None),
        )
        return init_settings, env, dotenv, file_secret_settings

    @model_validator(mode="before")
    @classmethod
    def _group_flat_keys(cls, data: Any) -> Any:
        """Move flat keys (``llm_model``: keyword arguments, environment) into their group's
        dict. A group given nested (a dict or a model) wins over flat values of its fields: only
        keyword arguments can nest, and they outrank the environment."""
        if not isinstance(data, dict):
            return data
        fields = flat_fields()
        data = apply_profile(data, fields=fields)
        out: dict[str, Any] = {}
        grouped: dict[str, dict[str, Any]] = {}
        for key, value in data.items():
            hit = fields.get(key)
            if hit is None:
                out[key] = value
            else:
                grouped.setdefault(hit[0], {})[hit[1]] = value
        for group, values in grouped.items():
            given = out.get(group)
            if isinstance(given, BaseModel):
                given = given.model_dump(exclude_unset=True)
            out[group] = {**values, **given} if isinstance(given, dict) else values
        return out

    @model_validator(mode="after")
    def _llm_time_arithmetic(self) -> Settings:
        """One LLM answer must fit a stage's LLM time budget (:attr:`llm_stage_time_budget`):
        ``LLM_CALLS_PER_ANSWER`` calls (the answer and its repair or correction round), each
        up to ``num_retries + 1`` attempts of ``llm_timeout`` s plus the backoff between them,
        on every model of the chain (primary + ``llm_fallbacks``). Else a slow model would
        exceed the soft time limit and fail the stage instead of falling back; so every process
        (the worker first) refuses these settings when a model is configured (``llm_model``,
        ``llm_deployments`` or ``llm_router_file``). Without one the deterministic analysts need
        no LLM time (a short soft limit is legitimate there), and a per-analysis ``--llm`` is
        still bounded by its stage session's deadline (``llm_stage_time_budget``; ≤ 0: no call).
        Lives here, not in a group: it spans ``llm`` and ``durability``."""
        llm = self.llm
        if not llm.configured:
            return self
        needed = llm.llm_worst_answer_seconds
        budget = self.llm_stage_time_budget
        if needed > budget:
            models = llm.llm_chain_length
            attempts = llm.llm_num_retries + 1
            raise ValueError(
                f"LLM time arithmetic: one answer may take {LLM_CALLS_PER_ANSWER} calls x {models} "
                f"model(s) x ({attempts} attempts x FINAGENT_LLM_TIMEOUT {llm.llm_timeout:g} s + "
                f"backoff) = {needed:g} s, more than the stage's LLM time budget "
                f"FINAGENT_TASK_SOFT_TIME_LIMIT - FINAGENT_LLM_TIME_RESERVE = "
                f"{self.durability.task_soft_time_limit} - {llm.llm_time_reserve:g} = {budget:g} s; "
                "lower FINAGENT_LLM_TIMEOUT, FINAGENT_LLM_NUM_RETRIES or FINAGENT_LLM_FALLBACKS, or "
                "raise FINAGENT_TASK_SOFT_TIME_LIMIT (with FINAGENT_TASK_TIME_LIMIT, "
                "FINAGENT_VISIBILITY_TIMEOUT and FINAGENT_LEASE_SECONDS)"
                + (
                    f"; longest chain (router file fallbacks and per-deployment timeouts counted): "
                    f"{' -> '.join(_longest(llm.llm_chains()))}"
                    if llm.llm_router_file is not None or llm.llm_deployments
                    else ""
                )
            )
        return self

    @property
    def llm_stage_time_budget(self) -> float:
        """Seconds of LLM calls one stage run may spend: ``durability.task_soft_time_limit -
        llm.llm_time_reserve`` (the deadline of the stage's LLM session). ≤ 0: no LLM call."""
        return float(self.durability.task_soft_time_limit) - self.llm.llm_time_reserve

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Settings:
        """A copy with ``update`` applied, like ``BaseModel.model_copy`` (no validation); flat
        keys (``{"llm_model": "x"}``) update a copy of their group. Raises nothing."""
        if not update:
            return super().model_copy(deep=deep)
        fields = flat_fields()
        top: dict[str, Any] = {}
        per_group: dict[str, dict[str, Any]] = {}
        for key, value in update.items():
            hit = fields.get(key)
            if hit is None:
                top[key] = value
            else:
                per_group.setdefault(hit[0], {})[hit[1]] = value
        for group, values in per_group.items():
            base = top.get(group, getattr(self, group))
            top[group] = base.model_copy(update=values, deep=deep)
        return super().model_copy(update=top, deep=deep)


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, read once. Tests call ``get_settings.cache_clear()`` after
    changing the environment."""
    return Settings()
