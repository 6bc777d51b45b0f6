"""The ``llm`` group of the settings (``Settings.llm``); variables stay ``FINAGENT_<FIELD>``."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr

#: LLM calls one checked answer needs at most besides tool rounds: the answer and one repair
#: or correction round (agents.analysts.llm_agents); longer tool loops are cut by the deadline.
LLM_CALLS_PER_ANSWER = 2


class LLMDeploymentSetting(BaseModel):
    """One LiteLLM Router deployment given in settings (``FINAGENT_LLM_DEPLOYMENTS``, JSON).

    ``model_name``: the name agents and fallbacks use; ``model``: the LiteLLM model string;
    ``api_base``: its server; ``api_key``: a secret (masked in ``repr``) or ``os.environ/NAME``;
    ``timeout``: seconds per request (default ``FINAGENT_LLM_TIMEOUT``).
    """

    model_config = ConfigDict(extra="forbid")

    model_name: str = Field(min_length=1, max_length=200)
    model: str = Field(min_length=1, max_length=200)
    api_base: str | None = None
    api_key: SecretStr | None = None
    timeout: float | None = Field(default=None, gt=0)


class LLMSettings(BaseModel):
    """LLM agents (docs/design.md, "LLM agents"): models, fallbacks, retries, budgets, the
    LiteLLM Router deployments and the response cache. No model: deterministic analysts.
    """

    model_config = ConfigDict(extra="forbid", validate_default=True)

    # 25 analyses at the full per-analysis budget: a day of heavy interactive use by one team;
    # an operator raises it per deployment (0 refuses every analysis of the HTTP API).
    tenant_daily_budget_usd: float | None = Field(
        default=25.0,
        ge=0,
        description=(
            "Max USD of LLM calls per tenant and UTC day (known prices only); POST /analyze answers "
            "429 once it is spent. Unset: no daily cap."
        ),
        json_schema_extra={"unit": "USD"},
    )
    cache: bool = Field(
        default=False,
        description="Serve an LLM request identical to an earlier one (model, messages, tools, params) "
        "from the response cache (table llm_cache) instead of the provider: re-runs cost no tokens.",
    )
    # LLM agents (docs/design.md, "LLM agents"). No model → deterministic analysts, no litellm import.
    model: str | None = Field(
        default=None, description="LiteLLM model string for every agent role, e.g. openai/gpt-4o."
    )
    model_query: str | None = Field(default=None, description="Override for parse_query.")
    model_technical: str | None = Field(default=None, description="Override for the technical analyst.")
    model_fundamental: str | None = Field(default=None, description="Override for the fundamental analyst.")
    model_sentiment: str | None = Field(default=None, description="Override for the sentiment analyst.")
    model_synthesis: str | None = Field(
        default=None, description="Override for synthesis and the grounding correction."
    )
    model_options: str | None = Field(
        default=None, description="Override for the options analyst of a csp analysis."
    )
    model_chart: str | None = Field(
        default=None, description="Override for the chart analyst of a csp analysis."
    )
    model_research: str | None = Field(
        default=None, description="Override for the research analyst of a csp analysis."
    )
    fallbacks: str = Field(
        default="", description="Comma-separated LiteLLM model strings tried in order after the primary."
    )
    api_base: str | None = Field(
        default=None,
        description="Base URL of an OpenAI-compatible server (Ollama, llama.cpp, vLLM).",
        json_schema_extra={"unit": "URL"},
    )
    api_key: SecretStr | None = Field(default=None, description="API key for api_base; never logged.")
    num_retries: int = Field(
        default=2,
        ge=0,
        le=5,
        description="Retries of one model on 429/5xx/timeouts before the fallback.",
        json_schema_extra={"unit": "retries"},
    )
    retry_timeouts: bool = Field(
        default=True,
        description="Retry a request that timed out (false: a timeout moves on to the next model; "
        "a CPU-bound local server that timed out is busy, and a retry only queues behind it).",
    )
    deployment_concurrency: int | None = Field(
        default=None,
        ge=1,
        le=64,
        description="Requests in flight per deployment from all finagent processes of this host "
        "(a lock file per slot); the wait counts against the stage's LLM time budget. None: no limit.",
        json_schema_extra={"unit": "requests"},
    )
    profile: Literal["local-cpu"] | None = Field(
        default=None,
        description='Preset for a model served on local CPUs (docs/llm.md, "Local CPU profile"): '
        "longer timeouts and stage limits that nest, one request at a time per deployment, no "
        "retry of a timed-out request. Explicit settings override it.",
    )
    retry_backoff: float = Field(
        default=1.0,
        ge=0,
        description="Seconds; retry n of a model waits backoff*2**(n-1).",
        json_schema_extra={"unit": "s"},
    )
    # 15 s: three attempts of two calls (an answer and its repair or correction) plus backoff
    # must fit the LLM time budget of a stage (soft limit 120 s - reserve 20 s), see
    # _llm_time_arithmetic; a slower model needs a higher FINAGENT_DURABILITY_TASK_SOFT_TIME_LIMIT.
    timeout: float = Field(
        default=15.0, gt=0, description="Seconds per LLM request (at most).", json_schema_extra={"unit": "s"}
    )
    max_tokens: int = Field(
        default=1024,
        ge=16,
        description="Completion tokens per LLM request.",
        json_schema_extra={"unit": "tokens"},
    )
    max_iterations: int = Field(
        default=3,
        ge=0,
        le=20,
        description="Tool-calling rounds per agent before the final answer is forced (0: no tools "
        "offered, one JSON answer from the context).",
        json_schema_extra={"unit": "rounds"},
    )
    input_cost_per_token: float | None = Field(
        default=None,
        ge=0,
        description="USD per prompt token for models missing in LiteLLM's price map.",
        json_schema_extra={"unit": "USD/token"},
    )
    output_cost_per_token: float | None = Field(
        default=None,
        ge=0,
        description="USD per completion token for models missing in LiteLLM's price map.",
        json_schema_extra={"unit": "USD/token"},
    )
    budget_tokens: int = Field(
        default=60_000,
        ge=0,
        description="Max prompt+completion tokens per analysis (all passes).",
        json_schema_extra={"unit": "tokens"},
    )
    budget_usd: float = Field(
        default=1.0,
        ge=0,
        description="Max USD per analysis (known prices only).",
        json_schema_extra={"unit": "USD"},
    )
    # LiteLLM Router deployments (fallbacks may reach another server). Each deployment
    # has its own api_base/api_key; FINAGENT_LLM_MODEL and the fallbacks may name them.
    router_file: Path | None = Field(
        default=None,
        description="YAML or TOML file in LiteLLM's proxy-config shape: model_list (model_name, "
        "litellm_params {model, api_base, api_key}) and router_settings (fallbacks, allowed_fails, "
        "cooldown_time). api_key may be 'os.environ/NAME'.",
        json_schema_extra={"unit": "path"},
    )
    deployments: list[LLMDeploymentSetting] = Field(
        default_factory=list,
        description="Deployments as JSON: [{model_name, model, api_base?, api_key?, timeout?}]; "
        "api_key may be 'os.environ/NAME'.",
    )
    # LiteLLM's Router default is 3 allowed fails per minute; one is enough here: a dead local
    # server costs a connect error per attempt, and an analysis makes only a handful of calls.
    allowed_fails: int = Field(
        default=1,
        ge=0,
        le=100,
        description="Failed attempts of a deployment before its cooldown.",
        json_schema_extra={"unit": "attempts"},
    )
    cooldown_time: float = Field(
        default=60.0,
        ge=0,
        description="Seconds a failed deployment is skipped (Retry-After if longer).",
        json_schema_extra={"unit": "s"},
    )
    cooldown_redis_url: str | None = Field(
        default=None,
        description="Redis for the Router's cooldowns, shared by every worker process and host "
        "(e.g. the broker's Redis); unset: each process keeps its own.",
        json_schema_extra={"unit": "URL"},
    )
    response_format: Literal["json_schema", "json_object_schema", "json_object", "off"] = Field(
        default="json_schema",
        description="The most constrained form a JSON answer is asked for with: json_schema "
        "(OpenAI's shape: vLLM, Ollama, llama-server, OpenAI), json_object_schema (llama.cpp's "
        "json_object + schema: llama-cpp-python), json_object (JSON mode) or off (prompt only). A "
        "server refusing a form (an error naming the response format) gets the next one, "
        "remembered per deployment and process.",
    )
    # 0: the same prompt gives the same answer as far as the server allows (greedy decoding on
    # llama.cpp, vLLM and Ollama), so a re-run or a replay does not move on sampling noise
    temperature: float = Field(
        default=0.0,
        ge=0,
        le=2,
        description="Sampling temperature sent on every LLM request (0: greedy decoding).",
    )
    run_budget_tokens: int | None = Field(
        default=None,
        ge=0,
        description="Max LLM tokens of one watchlist run (all its analyses); None: no limit.",
        json_schema_extra={"unit": "tokens"},
    )
    run_budget_usd: float | None = Field(
        default=None,
        ge=0,
        description="Max USD of one watchlist run (known prices only); None: no limit.",
        json_schema_extra={"unit": "USD"},
    )
    # A stage's tools (indicators, chart levels, calculator: ~1-3 s) and its checkpoint write
    # need time besides the model; 20 s of the 120 s soft limit leaves a wide margin for a slow
    # database.
    time_reserve: float = Field(
        default=20.0,
        ge=0,
        description="Seconds of a stage's soft time limit kept for its tools and checkpoint; the "
        "rest is the stage's LLM time budget.",
        json_schema_extra={"unit": "s"},
    )

    def _router_file_chains(self) -> tuple[dict[str, tuple[str, ...]], dict[str, float]]:
        """``(per-name fallbacks, per-name timeouts)`` of ``router_file`` (its
        ``router_settings.fallbacks`` and ``model_list[].litellm_params.timeout``); empty
        without a file or when it cannot be read (``agents.llm.config.load_router_file``
        reports a malformed file when a model is used)."""
        path = self.router_file
        if path is None:
            return {}, {}
        import tomllib

        import yaml  # type: ignore[import-untyped]  # PyYAML ships no stubs

        try:
            text = path.read_text(encoding="utf-8")
            data = tomllib.loads(text) if path.suffix.lower() == ".toml" else yaml.safe_load(text)
        except (OSError, ValueError, yaml.YAMLError):
            return {}, {}
        if not isinstance(data, dict):
            return {}, {}
        fallbacks: dict[str, tuple[str, ...]] = {}
        router_settings = data.get("router_settings")
        for item in (router_settings.get("fallbacks") if isinstance(router_settings, dict) else None) or []:
            if isinstance(item, dict):
                for name, chain in item.items():
                    if isinstance(chain, list):
                        fallbacks[str(name)] = tuple(str(c) for c in chain)
        timeouts: dict[str, float] = {}
        for entry in data.get("model_list") or []:
            params = entry.get("litellm_params") if isinstance(entry, dict) else None
            if isinstance(params, dict) and entry.get("model_name") and params.get("timeout") is not None:
                timeouts[str(entry["model_name"])] = float(params["timeout"])
        return fallbacks, timeouts

    def chains(self) -> list[tuple[str, ...]]:
        """Every model chain a role may run through: for each primary (``model``, the role
        overrides, else each router-file deployment or fallback key), the primary, its router
        file fallbacks, then ``fallbacks`` (each name once)."""
        file_fallbacks, timeouts = self._router_file_chains()
        primaries = (
            [
                m
                for m in (
                    self.model,
                    self.model_query,
                    self.model_technical,
                    self.model_fundamental,
                    self.model_sentiment,
                    self.model_synthesis,
                    self.model_options,
                    self.model_chart,
                    self.model_research,
                )
                if m and m.strip()
            ]
            or [*file_fallbacks, *timeouts, *(d.model_name for d in self.deployments)]
            or [""]
        )
        extra = [m.strip() for m in self.fallbacks.split(",") if m.strip()]
        chains = []
        for primary in dict.fromkeys(p.strip() for p in primaries):
            chain = [primary, *file_fallbacks.get(primary, ()), *extra]
            chains.append(tuple(dict.fromkeys(chain)))
        return chains

    @property
    def chain_length(self) -> int:
        """Longest model chain of a role: the primary, its router-file fallbacks and the
        distinct ``fallbacks`` (:meth:`chains`)."""
        return max(len(c) for c in self.chains())

    @property
    def worst_answer_seconds(self) -> float:
        """Longest time one checked LLM answer may take, s: ``LLM_CALLS_PER_ANSWER`` calls, each
        through the longest chain (:meth:`chains`), every model up to ``num_retries + 1``
        attempts of its own timeout (the router file's or ``deployments``' per-deployment
        ``timeout``, else ``timeout``) plus the backoff between them
        (``Settings._llm_time_arithmetic`` checks it)."""
        _, timeouts = self._router_file_chains()
        timeouts.update({d.model_name: d.timeout for d in self.deployments if d.timeout is not None})
        attempts = self.num_retries + 1
        backoff = self.retry_backoff * (2**self.num_retries - 1)
        worst = max(
            sum(attempts * timeouts.get(m, self.timeout) + backoff for m in chain) for chain in self.chains()
        )
        return round(LLM_CALLS_PER_ANSWER * worst, 3)

    @property
    def configured(self) -> bool:
        """Whether a model is configured (``model``, ``deployments`` or ``router_file``)."""
        return bool(self.model or self.deployments or self.router_file)
