"""The product's configuration: one pydantic-settings ``Settings`` with a field per area.

Every tunable has a safe default and an environment variable. The embedded default needs no
variable at all: no broker URL means an in-process Celery worker on kombu's in-memory transport
and a SQLite file, so ``finagent analyze AAPL`` works on a fresh machine.

The settings are grouped by area, each group a pydantic model in its own module of this
package: ``settings.service`` (:mod:`core.settings.service`), ``.durability``, ``.data``,
``.analysis``, ``.api``, ``.watchlists``, ``.broker``, ``.options`` and ``.llm``. Code reads
``settings.<group>.<field>`` (``settings.llm.model``, ``settings.options.min_weekly_roc``); no
field repeats its group's name. Every other name of a setting is derived from group and field:
the environment variable ``FINAGENT_<GROUP>_<FIELD>`` (``FINAGENT_LLM_MODEL``,
``FINAGENT_OPTIONS_MIN_WEEKLY_ROC``, ``FINAGENT_DURABILITY_TASK_TIME_LIMIT``) and the flat
keyword ``<group>_<field>`` of the constructor and of :meth:`Settings.model_copy`
(``Settings(llm_model="x")``); groups may also be given nested
(``Settings(llm={"model": "x"})``). :func:`flat_fields` maps a flat name to its group and field.

The names used before (``FINAGENT_CSP_MIN_WEEKLY_ROC``, ``FINAGENT_TASK_TIME_LIMIT``, ...) are
still read, with one warning per process naming old -> new (:mod:`core.settings.legacy`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import cache, lru_cache
from typing import Any

from pydantic import BaseModel, Field, create_model, model_validator
from pydantic.fields import FieldInfo
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
from core.settings.legacy import OLD_NAMES, warn_old_names
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
    "env_name",
    "flat_fields",
    "get_settings",
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
    """Every setting by its flat name ``<group>_<field>`` (the environment name without
    ``FINAGENT_``, lower case) -> ``(group, field)``, in group order then field order. Raises
    nothing (two settings with one flat name are a programming error caught by
    ``tests/core/test_settings_groups.py``)."""
    return {
        f"{group}_{name}": (group, name) for group, model in GROUPS.items() for name in model.model_fields
    }


def env_name(group: str, field: str) -> str:
    """The environment variable of ``settings.<group>.<field>``: ``FINAGENT_<GROUP>_<FIELD>``
    (``env_name("options", "min_weekly_roc") == "FINAGENT_OPTIONS_MIN_WEEKLY_ROC"``)."""
    return f"{ENV_PREFIX}{group}_{field}".upper()


class _FlatBase(BaseSettings):
    """Base of :func:`_flat_env_model` (the prefix and the ``.env`` file of :class:`Settings`)."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, env_file=".env", extra="ignore")


@cache
def _flat_env_model() -> type[BaseSettings]:
    """A settings class with every flat name (:func:`flat_fields`) and every old flat name
    (:data:`core.settings.legacy.OLD_NAMES`), annotation as in the group, default ``None``: the
    shape the environment and ``.env`` sources read, so ``FINAGENT_OPTIONS_MIN_WEEKLY_ROC`` is
    ``options.min_weekly_roc`` (complex fields such as ``llm.deployments`` are JSON-decoded by
    their annotation)."""
    flat = flat_fields()
    fields: dict[str, Any] = {}
    for name, (group, field) in flat.items():
        fields[name] = (GROUPS[group].model_fields[field].annotation, None)
    for old, new in OLD_NAMES.items():
        fields[old] = fields[new]
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
        "durability_task_soft_time_limit": 420,
        "durability_task_time_limit": 480,
        "durability_task_retry_backoff_max": 120,
        "durability_visibility_timeout": 900,
        "durability_lease_seconds": 600,
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
        name = data["llm"].get("profile")
    if name is None:
        return data
    if name not in PROFILES:
        raise ValueError(f"FINAGENT_LLM_PROFILE={name!r}: unknown profile (known: {', '.join(PROFILES)})")

    def nested(key: str, *, unset: bool) -> Any:
        group = data.get(fields[key][0])
        return group.model_dump(exclude_unset=unset) if isinstance(group, BaseModel) else group

    def given(key: str) -> bool:
        inner = nested(key, unset=True)
        return key in data or (isinstance(inner, dict) and fields[key][1] in inner)

    out = dict(data)
    for key, preset in PROFILES[name].items():
        if not given(key):
            out[key] = preset
    explicit = sorted(k for k in PROFILES[name] if given(k))

    def value(key: str) -> float:
        if key in out:
            return float(out[key])
        return float((nested(key, unset=False) or {})[fields[key][1]])

    def where(*keys: str) -> str:
        return ", ".join(
            f"{ENV_PREFIX}{k.upper()}={value(k):g} ({'explicit' if k in explicit else 'profile'})"
            for k in keys
        )

    soft, hard = "durability_task_soft_time_limit", "durability_task_time_limit"
    backoff, visibility, lease = (
        "durability_task_retry_backoff_max",
        "durability_visibility_timeout",
        "durability_lease_seconds",
    )
    broken: list[str] = []
    worst = 2 * value("llm_timeout") * (value("llm_num_retries") + 1)
    if worst > value(soft) - value("llm_time_reserve"):
        broken.append(
            "2 calls x (retries + 1) x timeout must fit the soft limit minus the reserve: "
            + where("llm_timeout", "llm_num_retries", soft, "llm_time_reserve")
        )
    if not value(soft) < value(hard):
        broken.append("soft limit < hard limit: " + where(soft, hard))
    if not value(hard) + value(backoff) < value(visibility):
        broken.append("hard limit + backoff max < visibility timeout: " + where(hard, backoff, visibility))
    if not value(hard) < value(lease):
        broken.append("hard limit < lease: " + where(hard, lease))
    if broken:
        raise ValueError(
            f"FINAGENT_LLM_PROFILE={name}: the explicit settings break the nesting of the time limits: "
            + "; ".join(broken)
        )
    return out


def _renew_old_names(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with every old flat name (:data:`OLD_NAMES`) replaced by its new one, warning
    once per process about those used; a new name given as well wins. Raises nothing."""
    used = [key for key in data if key in OLD_NAMES]
    if not used:
        return data
    warn_old_names(used)
    out = {key: value for key, value in data.items() if key not in OLD_NAMES}
    for old in used:
        out.setdefault(OLD_NAMES[old], data[old])
    return out


class _OldNamesRenamed(PydanticBaseSettingsSource):
    """A settings source (keyword arguments, environment, ``.env``) with its old flat names
    renamed (:func:`_renew_old_names`) before the sources are merged, so each source keeps its
    rank: an old keyword argument outranks a new environment variable."""

    def __init__(self, settings_cls: type[BaseSettings], inner: PydanticBaseSettingsSource) -> None:
        super().__init__(settings_cls)
        self._inner = inner

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        """Unused: :meth:`__call__` answers for the whole source."""
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        return _renew_old_names(self._inner())


def _longest(chains: list[tuple[str, ...]]) -> tuple[str, ...]:
    """The longest of ``chains`` (the first of equal length); ``()`` for none."""
    return max(chains, key=len, default=())


class Settings(BaseSettings):
    """Runtime configuration, read from ``FINAGENT_<GROUP>_<FIELD>`` environment variables (and
    ``.env``), one field per group (module docstring).

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
        still win over the environment, the environment over ``.env``, and in each source old
        names are renamed first (:class:`_OldNamesRenamed`)."""
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
        return (
            _OldNamesRenamed(settings_cls, init_settings),
            _OldNamesRenamed(settings_cls, env),
            _OldNamesRenamed(settings_cls, dotenv),
            file_secret_settings,
        )

    @model_validator(mode="before")
    @classmethod
    def _group_flat_keys(cls, data: Any) -> Any:
        """Move flat keys (``llm_model``: keyword arguments, environment) into their group's
        dict (old flat names were renamed by each source). A group given nested (a dict or a
        model) wins over flat values of its fields: only keyword arguments can nest, and they
        outrank the environment."""
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
        up to ``num_retries + 1`` attempts of ``llm.timeout`` s plus the backoff between them,
        on every model of the chain (primary + ``llm.fallbacks``). Else a slow model would
        exceed the soft time limit and fail the stage instead of falling back; so every process
        (the worker first) refuses these settings when a model is configured (``llm.model``,
        ``llm.deployments`` or ``llm.router_file``). Without one the deterministic analysts need
        no LLM time (a short soft limit is legitimate there), and a per-analysis ``--llm`` is
        still bounded by its stage session's deadline (``llm_stage_time_budget``; ≤ 0: no call).
        Lives here, not in a group: it spans ``llm`` and ``durability``."""
        llm = self.llm
        if not llm.configured:
            return self
        needed = llm.worst_answer_seconds
        budget = self.llm_stage_time_budget
        if needed > budget:
            models = llm.chain_length
            attempts = llm.num_retries + 1
            raise ValueError(
                f"LLM time arithmetic: one answer may take {LLM_CALLS_PER_ANSWER} calls x {models} "
                f"model(s) x ({attempts} attempts x FINAGENT_LLM_TIMEOUT {llm.timeout:g} s + "
                f"backoff) = {needed:g} s, more than the stage's LLM time budget "
                f"FINAGENT_DURABILITY_TASK_SOFT_TIME_LIMIT - FINAGENT_LLM_TIME_RESERVE = "
                f"{self.durability.task_soft_time_limit} - {llm.time_reserve:g} = {budget:g} s; "
                "lower FINAGENT_LLM_TIMEOUT, FINAGENT_LLM_NUM_RETRIES or FINAGENT_LLM_FALLBACKS, or "
                "raise FINAGENT_DURABILITY_TASK_SOFT_TIME_LIMIT (with FINAGENT_DURABILITY_TASK_TIME_LIMIT, "
                "FINAGENT_DURABILITY_VISIBILITY_TIMEOUT and FINAGENT_DURABILITY_LEASE_SECONDS)"
                + (
                    f"; longest chain (router file fallbacks and per-deployment timeouts counted): "
                    f"{' -> '.join(_longest(llm.chains()))}"
                    if llm.router_file is not None or llm.deployments
                    else ""
                )
            )
        return self

    @property
    def llm_stage_time_budget(self) -> float:
        """Seconds of LLM calls one stage run may spend: ``durability.task_soft_time_limit -
        llm.time_reserve`` (the deadline of the stage's LLM session). ≤ 0: no LLM call."""
        return float(self.durability.task_soft_time_limit) - self.llm.time_reserve

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Settings:
        """A copy with ``update`` applied, like ``BaseModel.model_copy`` (no validation); flat
        keys (``{"llm_model": "x", "durability_lease_seconds": 900}``, old flat names renamed with
        a warning) update a copy of their group. Raises nothing."""
        if not update:
            return super().model_copy(deep=deep)
        fields = flat_fields()
        top: dict[str, Any] = {}
        per_group: dict[str, dict[str, Any]] = {}
        for key, value in _renew_old_names(dict(update)).items():
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
    """The process-wide settings, read once: for entry points only (the CLI, the API app
    factory, the Celery app and worker, the sweeper, bench scripts); everything below them is
    handed its ``Settings``. Tests call ``get_settings.cache_clear()`` after changing the
    environment."""
    return Settings()
