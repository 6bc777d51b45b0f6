"""Tolerant reading of a small model's JSON answer, where tolerance cannot change a fact.

Small local models (0.5B–8B instruct models behind llama.cpp or Ollama without a JSON schema
grammar) answer the right content in the wrong wrapping more often than they answer wrong
content. Four repairs are safe because they only remove or unwrap, never invent:

- **prose around JSON** ("Sure! Here is the JSON: {...} Hope this helps"): the object is
  taken from the text (``agents.llm.loop.extract_json``: whole text, fenced block, outermost
  braces);
- **schema echo with values**: ``{"type": "object", "properties": {"signal": "HOLD", ...}}``
  (the model copied the schema's wrapper and filled the values in): the ``properties`` object is
  the answer when its values are not themselves schema fragments. A bare echo of the schema
  (values such as ``{"type": "string"}``) is not an answer: :class:`SchemaEchoError`, whose
  message tells the repair round exactly that;
- **unknown extra fields** (``"target_price": 987.65``) are dropped at every level of a model
  that forbids extras: the validated answer could not carry them anyway, and a dropped field can
  hold no number that reaches a later prompt or the report;
- **over-long lists** (nine rationale statements where eight are allowed) are cut to the
  field's ``max_length``, keeping the first items (every kept statement is still checked on its
  own by grounding); each cut is returned as a note.

Everything else (a wrong enum value, a missing field, a number out of range) stays an error for
the repair round: guessing there would change what the model said.
"""

from __future__ import annotations

import types
import typing
from typing import Any

from annotated_types import MaxLen
from pydantic import BaseModel

#: Keys that mark a JSON-schema fragment (a value of an echoed schema's ``properties``).
_SCHEMA_KEYS = frozenset(
    {"type", "title", "description", "enum", "const", "items", "properties", "required", "$ref", "$defs",
     "anyOf", "oneOf", "allOf", "maxItems", "minItems", "maxLength", "minLength", "minimum", "maximum",
     "exclusiveMinimum", "exclusiveMaximum", "pattern", "format", "default", "examples",
     "additionalProperties"}
)  # fmt: skip


class SchemaEchoError(ValueError):
    """The answer repeats the JSON schema instead of filling it in."""


def _is_schema_fragment(value: Any) -> bool:
    return isinstance(value, dict) and bool(value) and set(value) <= _SCHEMA_KEYS


def _unwrap_echo(data: dict[str, Any], model: type[BaseModel]) -> tuple[dict[str, Any], list[str]]:
    props = data.get("properties")
    if "properties" in model.model_fields or not isinstance(props, dict) or not props:
        return data, []
    if all(_is_schema_fragment(v) for v in props.values()):
        raise SchemaEchoError(
            "the answer repeats the JSON schema (its 'properties' hold type descriptions); "
            'answer with the values themselves, e.g. {"field": value, ...}'
        )
    if any(k in model.model_fields for k in props):
        return props, ["unwrapped the answer from an echoed schema's 'properties'"]
    return data, []


def _model_of(annotation: Any) -> tuple[type[BaseModel] | None, bool]:
    """``(model, is_list)`` when ``annotation`` is a model, ``list[model]`` or an optional one."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            found = _model_of(arg)
            if found[0] is not None:
                return found
        return None, False
    if origin is list:
        args = typing.get_args(annotation)
        inner = args[0] if args else None
        return (inner, True) if isinstance(inner, type) and issubclass(inner, BaseModel) else (None, True)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, False
    return None, False


def _clean(data: dict[str, Any], model: type[BaseModel], path: str, notes: list[str]) -> dict[str, Any]:
    fields = model.model_fields
    forbid = model.model_config.get("extra") == "forbid"
    out: dict[str, Any] = {}
    for key, value in data.items():
        if key not in fields:
            if forbid:
                notes.append(f"dropped unknown field {path}{key}")
                continue
            out[key] = value
            continue
        info = fields[key]
        limit = next((m.max_length for m in info.metadata if isinstance(m, MaxLen)), None)
        inner, is_list = _model_of(info.annotation)
        if is_list and isinstance(value, list):
            if limit is not None and len(value) > limit:
                notes.append(f"kept the first {limit} of {len(value)} items of {path}{key}")
                value = value[:limit]
            if inner is not None:
                value = [
                    _clean(v, inner, f"{path}{key}[{i}].", notes) if isinstance(v, dict) else v
                    for i, v in enumerate(value)
                ]
        elif inner is not None and isinstance(value, dict):
            value = _clean(value, inner, f"{path}{key}.", notes)
        out[key] = value
    return out


def lenient_data(data: dict[str, Any], model: type[BaseModel]) -> tuple[dict[str, Any], list[str]]:
    """``data`` made acceptable for ``model`` by the safe repairs of the module docstring.

    Returns ``(data, notes)``: the cleaned object (validate it with ``model`` next) and one note
    per repair. Raises:
        SchemaEchoError: ``data`` is an echo of the schema without values.
    """
    unwrapped, notes = _unwrap_echo(data, model)
    return _clean(unwrapped, model, "", notes), notes
