"""Settings-driven LLM configuration: one model string per agent role, fallbacks, limits, prices.

``FINAGENT_LLM_MODEL`` is the default of every role; ``FINAGENT_LLM_MODEL_<ROLE>`` overrides one
role (roles: query, technical, fundamental, sentiment, synthesis). A per-analysis override (the
CLI's ``--llm MODEL``) travels as ``FinancialAgentState.llm_model``, so a worker in another
process uses the model the producer asked for. No model for a role → that role runs
deterministically.

Deployments (LiteLLM Router ``model_list``): every name a role or a fallback uses is one Router
deployment with its own ``api_base``/``api_key``/``timeout``. They come from
``FINAGENT_LLM_DEPLOYMENTS`` (JSON) and ``FINAGENT_LLM_ROUTER_FILE`` (YAML or TOML in LiteLLM's
proxy-config shape: ``model_list`` + ``router_settings``); a name found in neither is a deployment
of that LiteLLM model string with ``FINAGENT_LLM_API_BASE``/``FINAGENT_LLM_API_KEY``. Fallbacks:
the file's ``router_settings.fallbacks`` (``[{"primary": ["backup", ...]}]``, LiteLLM's format)
for that name, then ``FINAGENT_LLM_FALLBACKS``.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped]  # PyYAML ships no stubs

from core.settings import Settings

#: LiteLLM's convention for a secret read from the environment (proxy config.yaml).
ENV_PREFIX = "os.environ/"
#: The key sent to a local OpenAI-compatible server configured without one (LiteLLM's OpenAI
#: client refuses to send a request without a key; the server ignores it). Not a secret.
PLACEHOLDER_KEY = "no-key"


class RouterConfigError(ValueError):
    """The router file or ``FINAGENT_LLM_DEPLOYMENTS`` is malformed (the message says where)."""


@dataclass(frozen=True)
class Deployment:
    """One LiteLLM Router deployment.

    ``name``: the ``model_name`` roles and fallbacks use; ``model``: the LiteLLM model string
    sent to the provider; ``api_base``: its server (``None``: the provider's default);
    ``api_key``: the secret value (only ever handed to LiteLLM; ``repr`` hides it);
    ``timeout``: seconds per request (``None``: the config's ``timeout``).
    """

    name: str
    model: str
    api_base: str | None = None
    api_key: str | None = field(default=None, repr=False)
    timeout: float | None = None

    def public(self) -> dict[str, Any]:
        """A loggable description (no key)."""
        return {
            "name": self.name,
            "model": self.model,
            "api_base": self.api_base,
            "api_key_set": self.api_key is not None,
        }


class Role(StrEnum):
    """Agent roles with their own model setting."""

    QUERY = "query"
    TECHNICAL = "technical"
    FUNDAMENTAL = "fundamental"
    SENTIMENT = "sentiment"
    SYNTHESIS = "synthesis"
    OPTIONS = "options"
    CHART = "chart"
    RESEARCH = "research"


@dataclass(frozen=True)
class LLMConfig:
    """The resolved configuration of the LLM agents for one analysis.

    Attributes:
        models: role → primary LiteLLM model string (roles without a model are absent).
        fallbacks: models tried in order after a role's primary fails (deduplicated).
        api_base / api_key: for OpenAI-compatible servers; ``api_key`` is the secret value and
            is only ever handed to LiteLLM (never logged, never in a row).
        num_retries / retry_backoff: retries of one model on 429, 5xx, timeouts and connection
            errors, waiting ``retry_backoff * 2**(n-1)`` s (or the server's Retry-After if shorter).
        timeout: seconds per request. max_tokens: completion tokens per request.
        max_iterations: tool-calling rounds per agent before the final answer is forced.
        input_cost_per_token / output_cost_per_token: USD prices used when LiteLLM's price map
            does not know a model (``None``: cost unknown, recorded as NULL).
        budget_tokens / budget_usd: per-analysis limits over all passes and stages.
        deployments: named Router deployments (module docstring); names not listed use
            ``api_base``/``api_key``.
        model_fallbacks: per-name fallbacks (router file ``router_settings.fallbacks``), tried
            before ``fallbacks``.
        allowed_fails / cooldown_time: a deployment that failed more than ``allowed_fails``
            times within ``cooldown_time`` s is skipped for ``cooldown_time`` s (or the server's
            Retry-After when longer): LiteLLM Router's cooldown.
        response_format: ``json_schema`` | ``json_object_schema`` | ``json_object`` | ``off``: the
            most constrained form JSON answers are asked for with (``agents.llm.session``).
        temperature: sampling temperature sent on every request (0: greedy decoding).
        retry_timeouts: whether a timed-out request is retried (else the next model is tried).
        deployment_concurrency: requests in flight per deployment from all processes of this
            host (``None``: no limit; ``agents.llm.session``'s slot locks).
        cooldown_redis_url: Redis where the Router keeps cooldowns (shared by processes);
            ``None``: in the process.
    """

    models: dict[Role, str]
    fallbacks: tuple[str, ...] = ()
    api_base: str | None = None
    api_key: str | None = None
    num_retries: int = 2
    retry_backoff: float = 1.0
    timeout: float = 60.0
    max_tokens: int = 1024
    max_iterations: int = 3
    input_cost_per_token: float | None = None
    output_cost_per_token: float | None = None
    budget_tokens: int = 60_000
    budget_usd: float = 1.0
    deployments: tuple[Deployment, ...] = ()
    model_fallbacks: dict[str, tuple[str, ...]] = field(default_factory=dict)
    allowed_fails: int = 1
    cooldown_time: float = 60.0
    response_format: str = "json_schema"
    temperature: float = 0.0
    retry_timeouts: bool = True
    deployment_concurrency: int | None = None
    cooldown_redis_url: str | None = field(default=None, repr=False)

    def deployment(self, name: str) -> Deployment:
        """The deployment called ``name``: a listed one, else ``name`` as a LiteLLM model string
        on ``api_base``/``api_key`` (a local OpenAI-compatible server gets the placeholder key
        ``no-key``: LiteLLM's OpenAI client refuses to send a request without one)."""
        for dep in self.deployments:
            if dep.name == name:
                return dep
        key = self.api_key or (PLACEHOLDER_KEY if self.api_base else None)
        return Deployment(name=name, model=name, api_base=self.api_base, api_key=key)

    def model_for(self, role: Role) -> str | None:
        """The primary model of ``role``, or ``None`` when that role runs deterministically."""
        return self.models.get(role)

    def chain_for(self, role: Role) -> list[str]:
        """``[primary, *fallbacks]`` for ``role`` without repeats; empty when no model."""
        primary = self.model_for(role)
        if primary is None:
            return []
        out = [primary]
        out += [m for m in self.model_fallbacks.get(primary, ()) if m not in out]
        out += [m for m in self.fallbacks if m not in out]
        return out

    def all_names(self) -> list[str]:
        """Every deployment name the roles and fallbacks may call (each once, in order)."""
        names = [*self.models.values(), *self.fallbacks]
        names += [m for chain in self.model_fallbacks.values() for m in chain]
        names += [d.name for d in self.deployments]
        return list(dict.fromkeys(names))

    def public(self) -> dict[str, Any]:
        """A loggable description (no key)."""
        return {
            "models": {role.value: model for role, model in self.models.items()},
            "fallbacks": list(self.fallbacks),
            "api_base": self.api_base,
            "api_key_set": self.api_key is not None,
            "deployments": [d.public() for d in self.deployments],
            "model_fallbacks": {k: list(v) for k, v in self.model_fallbacks.items()},
        }


def _secret(value: Any, *, where: str) -> str | None:
    """A key value: ``os.environ/NAME`` is read from the environment (unset → error)."""
    if value is None:
        return None
    text = value.get_secret_value() if hasattr(value, "get_secret_value") else str(value)
    if text.startswith(ENV_PREFIX):
        name = text[len(ENV_PREFIX) :]
        if name not in os.environ:
            raise RouterConfigError(f"{where}: api_key names the environment variable {name}, which is unset")
        return os.environ[name]
    return text


def load_router_file(path: Path) -> tuple[list[Deployment], dict[str, tuple[str, ...]], dict[str, Any]]:
    """Read a router file (YAML ``.yaml``/``.yml`` or TOML ``.toml``) in LiteLLM's proxy-config shape.

    Returns ``(deployments, per-name fallbacks, other router_settings)``; only
    ``allowed_fails``, ``cooldown_time`` and ``fallbacks`` of ``router_settings`` are used.
    Raises:
        RouterConfigError: unreadable file, unknown extension, missing ``model_name``/``model``,
            a repeated ``model_name`` (one deployment per name: the session's cooldown and
            fallbacks are per name), malformed ``fallbacks``, an unset ``os.environ/`` key.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise RouterConfigError(f"FINAGENT_LLM_ROUTER_FILE {path}: {exc.strerror or exc}") from exc
    try:
        if path.suffix.lower() in (".yaml", ".yml"):
            data = yaml.safe_load(text) or {}
        elif path.suffix.lower() == ".toml":
            data = tomllib.loads(text)
        else:
            raise RouterConfigError(f"FINAGENT_LLM_ROUTER_FILE {path}: expected .yaml, .yml or .toml")
    except (yaml.YAMLError, tomllib.TOMLDecodeError) as exc:
        raise RouterConfigError(f"FINAGENT_LLM_ROUTER_FILE {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise RouterConfigError(f"FINAGENT_LLM_ROUTER_FILE {path}: expected a mapping at the top")
    deployments: list[Deployment] = []
    for i, entry in enumerate(data.get("model_list") or []):
        where = f"{path}: model_list[{i}]"
        params = entry.get("litellm_params") if isinstance(entry, dict) else None
        if not isinstance(params, dict) or not entry.get("model_name") or not params.get("model"):
            raise RouterConfigError(f"{where}: needs model_name and litellm_params.model")
        timeout = params.get("timeout")
        deployments.append(
            Deployment(
                name=str(entry["model_name"]),
                model=str(params["model"]),
                api_base=params.get("api_base"),
                api_key=_secret(params.get("api_key"), where=where),
                timeout=float(timeout) if timeout is not None else None,
            )
        )
    settings = data.get("router_settings") or {}
    if not isinstance(settings, dict):
        raise RouterConfigError(f"{path}: router_settings must be a mapping")
    fallbacks: dict[str, tuple[str, ...]] = {}
    for item in settings.get("fallbacks") or []:
        if not isinstance(item, dict):
            raise RouterConfigError(f"{path}: fallbacks must be a list of {{name: [names]}}")
        for name, chain in item.items():
            if not isinstance(chain, list) or not all(isinstance(c, str) for c in chain):
                raise RouterConfigError(f"{path}: fallbacks of {name} must be a list of names")
            fallbacks[str(name)] = tuple(chain)
    other = {k: settings[k] for k in ("allowed_fails", "cooldown_time") if k in settings}
    return deployments, fallbacks, other


def _deployments(settings: Settings) -> tuple[list[Deployment], dict[str, tuple[str, ...]], dict[str, Any]]:
    listed = [
        Deployment(
            name=d.model_name,
            model=d.model,
            api_base=d.api_base,
            api_key=_secret(d.api_key, where=f"FINAGENT_LLM_DEPLOYMENTS {d.model_name}"),
            timeout=d.timeout,
        )
        for d in settings.llm.deployments
    ]
    fallbacks: dict[str, tuple[str, ...]] = {}
    other: dict[str, Any] = {}
    if settings.llm.router_file is not None:
        from_file, fallbacks, other = load_router_file(settings.llm.router_file)
        listed += from_file
    seen: set[str] = set()
    for dep in listed:
        if dep.name in seen:
            raise RouterConfigError(
                f"deployment {dep.name!r} is defined twice (one deployment per model_name)"
            )
        seen.add(dep.name)
    return listed, fallbacks, other


def role_models(*, settings: Settings, override: str | None = None) -> dict[Role, str]:
    """The model of each role that has one (``override`` for all roles, else the role's own
    setting, else ``FINAGENT_LLM_MODEL``); empty when no model is configured. Reads settings only
    (no router file), so "is a model configured?" costs nothing."""
    default = override or settings.llm.model
    per_role = {
        Role.QUERY: settings.llm.model_query,
        Role.TECHNICAL: settings.llm.model_technical,
        Role.FUNDAMENTAL: settings.llm.model_fundamental,
        Role.SENTIMENT: settings.llm.model_sentiment,
        Role.SYNTHESIS: settings.llm.model_synthesis,
        Role.OPTIONS: settings.llm.model_options,
        Role.CHART: settings.llm.model_chart,
        Role.RESEARCH: settings.llm.model_research,
    }
    models: dict[Role, str] = {}
    for role, specific in per_role.items():
        chosen = override or specific or default
        if chosen and chosen.strip():
            models[role] = chosen.strip()
    return models


def llm_config(*, settings: Settings, override: str | None = None) -> LLMConfig | None:
    """The LLM configuration from ``settings`` (and an optional model ``override`` for all roles).

    Returns ``None`` when no role has a model (:func:`role_models`): the pipeline then runs the
    deterministic analysts.
    Raises:
        RouterConfigError: a malformed router file or ``FINAGENT_LLM_DEPLOYMENTS`` (only when a
            model is configured).
    """
    models = role_models(settings=settings, override=override)
    if not models:
        return None
    fallbacks = tuple(dict.fromkeys(m.strip() for m in settings.llm.fallbacks.split(",") if m.strip()))
    deployments, model_fallbacks, router_settings = _deployments(settings)
    return LLMConfig(
        models=models,
        fallbacks=fallbacks,
        api_base=settings.llm.api_base,
        api_key=settings.llm.api_key.get_secret_value() if settings.llm.api_key else None,
        num_retries=settings.llm.num_retries,
        retry_backoff=settings.llm.retry_backoff,
        timeout=settings.llm.timeout,
        max_tokens=settings.llm.max_tokens,
        max_iterations=settings.llm.max_iterations,
        input_cost_per_token=settings.llm.input_cost_per_token,
        output_cost_per_token=settings.llm.output_cost_per_token,
        budget_tokens=settings.llm.budget_tokens,
        budget_usd=settings.llm.budget_usd,
        deployments=tuple(deployments),
        model_fallbacks=model_fallbacks,
        allowed_fails=int(router_settings.get("allowed_fails", settings.llm.allowed_fails)),
        cooldown_time=float(router_settings.get("cooldown_time", settings.llm.cooldown_time)),
        response_format=settings.llm.response_format,
        temperature=settings.llm.temperature,
        retry_timeouts=settings.llm.retry_timeouts,
        deployment_concurrency=settings.llm.deployment_concurrency,
        cooldown_redis_url=settings.llm.cooldown_redis_url,
    )
