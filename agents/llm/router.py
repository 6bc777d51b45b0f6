"""The LiteLLM ``Router`` of a configuration (one per process and configuration, so its
cooldowns outlive one analysis), counting no response-format refusal as a failure."""

from __future__ import annotations

from typing import Any

from agents.llm.config import PLACEHOLDER_KEY, LLMConfig
from agents.llm.forms import refuses_response_format
from agents.llm.pricing import price_map
from core.masking import register_secrets

_ROUTERS: dict[tuple[Any, ...], Any] = {}


_ROUTER_CLASS: Any = None


def _router_class(router: Any) -> Any:
    """LiteLLM's ``Router`` with one change: a response-format refusal
    (:func:`refuses_response_format`) is not counted as a deployment failure. The Router counts
    every failed request towards ``allowed_fails`` and cools down a server after a 5xx;
    llama-cpp-python answers the JSON-schema form with a 500, and a server that only lacks one
    structured-output form is healthy (the session asks it again with the next form)."""
    global _ROUTER_CLASS
    if _ROUTER_CLASS is None:

        class _Router(router):
            def deployment_callback_on_failure(self, kwargs: Any, *args: Any, **kw: Any) -> bool:
                exc = (kwargs or {}).get("exception")
                if isinstance(exc, Exception) and refuses_response_format(exc):
                    return False
                return bool(super().deployment_callback_on_failure(kwargs, *args, **kw))

        _ROUTER_CLASS = _Router
    return _ROUTER_CLASS


def router_for(config: LLMConfig) -> Any:
    """A LiteLLM ``Router`` with one deployment per name of ``config`` (cached per process, so
    its cooldowns outlive one analysis).

    Each deployment has its own model, ``api_base``, ``api_key`` and timeout
    (``LLMConfig.deployment``). Router-level retries and fallbacks are off (the session's loop
    owns them: one row per attempt, the budget checked before each); its failure counting and
    cooldown (``allowed_fails``, ``cooldown_time``) are on.
    """
    # lazy (see module docstring)
    import litellm
    from litellm import Router

    price_map(litellm)  # snapshot before the first Router registers its deployments
    litellm.suppress_debug_info = True  # no "Give Feedback" banners on stdout (--json owns it)
    litellm.drop_params = True  # e.g. response_format on a provider without it: dropped, not an error
    deployments = [config.deployment(name) for name in config.all_names()]
    key = (
        tuple((d.name, d.model, d.api_base, d.api_key, d.timeout) for d in deployments),
        config.timeout,
        config.allowed_fails,
        config.cooldown_time,
        config.cooldown_redis_url,
    )
    router = _ROUTERS.get(key)
    if router is None:
        # the keys handed to LiteLLM are masked wherever this process writes text, also when
        # the configuration did not come from the process settings (core.masking)
        keys = [d.api_key for d in deployments if d.api_key and d.api_key != PLACEHOLDER_KEY]
        register_secrets("LLM deployment api_key", keys)
        model_list = []
        for dep in deployments:
            params: dict[str, Any] = {
                "model": dep.model,
                "timeout": dep.timeout or config.timeout,
                "max_retries": 0,
            }
            if dep.api_base:
                params["api_base"] = dep.api_base
            if dep.api_key:
                params["api_key"] = dep.api_key
            model_list.append({"model_name": dep.name, "litellm_params": params})
        extra: dict[str, Any] = {}
        if config.cooldown_redis_url:
            # LiteLLM's DualCache: cooldowns written to Redis too, so every worker process skips
            # a deployment another one saw failing (the failure counts stay per process)
            extra["redis_url"] = config.cooldown_redis_url
        router = _router_class(Router)(
            model_list=model_list,
            num_retries=0,
            allowed_fails=config.allowed_fails,
            cooldown_time=config.cooldown_time,
            disable_cooldowns=config.cooldown_time <= 0,
            **extra,
        )
        _ROUTERS[key] = router
    return router
