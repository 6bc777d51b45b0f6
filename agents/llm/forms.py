"""Structured output negotiated per deployment (``agents.llm.session``'s module docstring): the
forms a call that wants JSON may be asked with, most constrained first, and what each
deployment's server has refused or answered with in this process."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel

from agents.llm.config import LLMConfig

#: The structured-output forms, most constrained first. ``json_schema``: OpenAI's
#: ``{"type": "json_schema", "json_schema": {...}}`` (vLLM, Ollama, llama.cpp's llama-server,
#: OpenAI); ``json_object_schema``: ``{"type": "json_object", "schema": {...}}`` (llama.cpp's
#: own shape, the one llama-cpp-python's server accepts: it answers HTTP 500 "only 'text' or
#: 'json_object' allowed" to ``json_schema``); ``json_object``: JSON mode without a schema;
#: ``prompt``: no ``response_format`` (the prompt alone asks for JSON).
RESPONSE_FORMS = ("json_schema", "json_object_schema", "json_object", "prompt")


#: Words of an error body that name the response format: a 4xx/5xx carrying one is the server
#: refusing the form asked for, not a transient failure.
_FORMAT_WORDS = re.compile(r"response[_ ]format|json_schema|json_object|json schema", re.IGNORECASE)


#: (deployment name, api_base) → index in RESPONSE_FORMS of the most constrained form its
#: server has not refused (per process: a refused form is never sent to it again).
_FLOOR: dict[tuple[str, str | None], int] = {}


#: (deployment name, api_base) → the form its server last answered with (per process).
ACCEPTED: dict[tuple[str, str | None], str] = {}


def deployment_key(config: LLMConfig, model: str) -> tuple[str, str | None]:
    """The negotiation key of deployment ``model``: its name and server (two configurations may
    give one name different servers)."""
    return model, config.deployment(model).api_base


def _start_index(config: LLMConfig, *, has_schema: bool) -> int:
    """Where the ladder starts for ``config.response_format`` (``off`` → prompt only); a call
    without a schema starts at plain JSON mode."""
    setting = {"off": "prompt"}.get(config.response_format, config.response_format)
    index = RESPONSE_FORMS.index(setting) if setting in RESPONSE_FORMS else 0
    return max(index, 0 if has_schema else RESPONSE_FORMS.index("json_object"))


def form_for(config: LLMConfig, model: str, *, has_schema: bool) -> str:
    """The form to ask deployment ``model`` with: the configured start, or the first form its
    server has not refused in this process, whichever is less constrained."""
    floor = _FLOOR.get(deployment_key(config, model), 0)
    return RESPONSE_FORMS[max(floor, _start_index(config, has_schema=has_schema))]


def step_down(config: LLMConfig, model: str, refused: str) -> str:
    """Remember that ``model``'s server refused ``refused`` and return the next form
    (``prompt`` is never refused: it sends no ``response_format``)."""
    index = min(RESPONSE_FORMS.index(refused) + 1, len(RESPONSE_FORMS) - 1)
    key = deployment_key(config, model)
    _FLOOR[key] = max(_FLOOR.get(key, 0), index)
    return RESPONSE_FORMS[index]


def negotiated_forms() -> dict[str, str]:
    """``deployment name → form`` its server answered with last in this process (for logs and
    tests; a deployment not asked for JSON yet is absent)."""
    return {name: form for (name, _base), form in ACCEPTED.items()}


def forget_forms() -> None:
    """Forget every deployment's negotiated form (a new process's state): for benchmarks that
    measure the first negotiation again. Raises nothing."""
    _FLOOR.clear()
    ACCEPTED.clear()


def refuses_response_format(exc: Exception) -> bool:
    """True when ``exc`` is an HTTP 4xx/5xx (not a 429) whose text names the response format:
    the server refuses the structured-output form asked for. LiteLLM puts the provider's error
    body into the exception's message."""
    status = getattr(exc, "status_code", None)
    if not isinstance(status, int) or status < 400 or status == 429:
        return False
    return bool(_FORMAT_WORDS.search(str(exc)))


def response_format_param(
    form: str | None, schema: type[BaseModel] | dict[str, Any] | None
) -> dict[str, Any] | None:
    """The ``response_format`` parameter of ``form`` for ``schema`` (``None``: none is sent)."""
    if form is None or form == "prompt":
        return None
    if form == "json_object" or schema is None:
        return {"type": "json_object"}
    if isinstance(schema, dict):
        name, body = str(schema.get("title") or "answer"), schema
    else:
        name, body = schema.__name__, schema.model_json_schema()
    if form == "json_object_schema":
        return {"type": "json_object", "schema": body}
    return {"type": "json_schema", "json_schema": {"name": name, "schema": body, "strict": False}}
