"""Known secret values, masked wherever text is stored, logged, sent or returned.

Pattern redaction (``db.redact``) recognises a credential by its surroundings (``api_key=…``,
``Bearer …``, ``scheme://user:…@``), so it cannot catch a provider that echoes a key in its own
words ("Incorrect API key provided: sk-…"). This module knows the configured values themselves
and replaces every occurrence with :data:`MASK`, whatever the wording around it
(docs/security.md, "Secrets").

Where the values come from (:func:`configured_secrets`, read once per settings object):

* every ``SecretStr`` setting (``FINAGENT_LLM_API_KEY``, ``FINAGENT_TAVILY_API_KEY``,
  ``FINAGENT_URL_SIGNING_KEY``, ``FINAGENT_ALPACA_API_KEY``, ``FINAGENT_ALPACA_SECRET_KEY``,
  and any added later), an ``os.environ/NAME`` value resolved;
* the ``api_key`` of every deployment in ``FINAGENT_LLM_DEPLOYMENTS`` and in the router file
  (``FINAGENT_LLM_ROUTER_FILE``, LiteLLM's ``model_list[].litellm_params.api_key``);
* the password of every URL in a setting (database, broker, result backend, session and cooldown
  Redis, API bases, RSS feeds), decoded and as written;
* LLM provider keys LiteLLM reads from the environment itself (``OPENAI_API_KEY``,
  ``ANTHROPIC_API_KEY``, …: names ending in ``_API_KEY``, ``_SECRET_KEY``,
  ``_SECRET_ACCESS_KEY``, ``_ACCESS_TOKEN``, ``_AUTH_TOKEN``, ``_API_TOKEN``) and Flower's
  ``FLOWER_BASIC_AUTH`` passwords, ``FLOWER_OAUTH2_SECRET`` and ``FLOWER_COOKIE_SECRET``;
* values a process adds at start (:func:`register_secrets`: ``finagent flower --basic-auth``).

Each value is masked as written and in the forms it takes in the places it goes: URL-encoded
(``quote``, ``quote_plus``), JSON-escaped (``ensure_ascii`` on and off), Python-``repr``-escaped
(Celery's ``argsrepr``) and HTML-escaped (the digest page). Values shorter than
:data:`MIN_SECRET_LENGTH` are not masked by value (a password ``pg`` would turn every "pg" of a
report into ``***``): a warning names their setting when the masker is built; URL passwords
among them are still masked by the URL pattern of ``db.redact``.

Cost: a text is searched once per form with ``str.__contains__`` (CPython's two-way/Horspool
search, ~10 GB/s here): one compiled regex alternation or an Aho-Corasick automaton
(``ahocorasick-rs``) measured slower for 1-10 secrets on a 158 KB state (bench/secret_masking.py,
docs/benchmarks.md). With no secret configured every function returns its argument at once.

Imports nothing of the project but the settings (``core`` is the ground floor).
"""

from __future__ import annotations

import html
import json
import logging
import os
import re
import threading
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, cast
from urllib.parse import quote, quote_plus, unquote, urlsplit

import orjson
from pydantic import SecretStr

from core.settings import Settings, flat_fields, get_settings

logger = logging.getLogger("finagent.secrets")

#: What a secret value is replaced with (the same marker as ``db.redact``'s pattern redaction).
MASK: Final = "***"
#: Shortest value masked by value (characters). Eight is the shortest password NIST SP 800-63B
#: accepts; a shorter value is too likely to occur in ordinary text ("guest", "pg", "no-key").
MIN_SECRET_LENGTH: Final = 8
#: LiteLLM's convention for a key read from the environment (``agents.llm.config.ENV_PREFIX``).
ENV_PREFIX: Final = "os.environ/"
#: Environment variables holding provider credentials that LiteLLM (or a provider SDK) reads
#: itself when no key is configured: ``OPENAI_API_KEY``, ``AWS_SECRET_ACCESS_KEY``, ...
PROVIDER_KEY_ENV_RE: Final = re.compile(
    r"(?:^|_)(?:API_KEY|SECRET_KEY|SECRET_ACCESS_KEY|ACCESS_TOKEN|AUTH_TOKEN|API_TOKEN)$"
)
#: Flower's own secrets in its environment (its options read from ``FLOWER_*`` variables).
FLOWER_SECRET_ENV: Final = ("FLOWER_OAUTH2_SECRET", "FLOWER_COOKIE_SECRET")
_ORJSON_OPTIONS: Final = orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY


@dataclass(frozen=True)
class Secret:
    """One configured secret: ``source`` names where it was set (a setting or variable name,
    never the value), ``value`` is the secret itself."""

    source: str
    value: str

    def __repr__(self) -> str:
        """``Secret(source=…)``: the value never reaches a repr (logs, tracebacks)."""
        return f"Secret(source={self.source!r})"


def encoded_forms(value: str) -> set[str]:
    """``value`` and the forms it takes when embedded in other text: URL-encoded (``quote``
    with nothing safe, ``quote_plus``), JSON-escaped (ASCII and UTF-8 output), Python ``repr``
    escaped, HTML-escaped. For a value of letters, digits and ``-``/``_``/``.`` all are the
    value itself."""
    return {
        value,
        quote(value, safe=""),
        quote_plus(value, safe=""),
        json.dumps(value)[1:-1],
        json.dumps(value, ensure_ascii=False)[1:-1],
        repr(value)[1:-1],
        html.escape(value),
    }


class SecretMasker:
    """Replaces known secret values (and their :func:`encoded_forms`) with :data:`MASK`.

    ``SecretMasker(values)``: values shorter than :data:`MIN_SECRET_LENGTH` are ignored. Longer
    forms are replaced first, so a secret that contains another is masked whole. A masker
    without values is falsy and returns every argument unchanged.
    """

    __slots__ = ("_forms",)

    def __init__(self, values: Iterable[str] = ()) -> None:
        forms: set[str] = set()
        for value in values:
            if len(value) >= MIN_SECRET_LENGTH:
                forms |= encoded_forms(value)
        self._forms: tuple[str, ...] = tuple(sorted(forms, key=lambda f: (-len(f), f)))

    def __bool__(self) -> bool:
        """True when there is something to mask."""
        return bool(self._forms)

    def __repr__(self) -> str:
        """The number of forms, never a value."""
        return f"SecretMasker({len(self._forms)} forms)"

    def found_in(self, text: str) -> bool:
        """Whether ``text`` contains any secret form."""
        return any(form in text for form in self._forms)

    def mask_text(self, text: str) -> str:
        """``text`` with every secret form replaced by :data:`MASK` (the same object when
        nothing matched)."""
        for form in self._forms:
            if form in text:
                text = text.replace(form, MASK)
        return text

    def mask[T](self, obj: T) -> T:
        """``obj`` with every secret form masked in its strings (dict keys included), for
        JSON-like values: ``str``, and ``dict``/``list``/``tuple`` of them at any depth (other
        leaves are kept as they are). Returns ``obj`` itself when it holds no secret (checked
        once on its JSON text, at C speed), else a masked copy (:meth:`mask_tree`)."""
        if not self._forms:
            return obj
        if isinstance(obj, str):
            return cast(T, self.mask_text(obj))
        if not isinstance(obj, dict | list | tuple):
            return obj
        try:
            text = orjson.dumps(obj, default=str, option=_ORJSON_OPTIONS).decode()
        except (TypeError, orjson.JSONEncodeError):  # not JSON-able: walk it
            return self.mask_tree(obj)
        return self.mask_tree(obj) if self.found_in(text) else obj

    def mask_tree[T](self, obj: T) -> T:
        """A copy of ``obj`` with every string (keys included) passed through
        :meth:`mask_text`, walking ``dict``/``list``/``tuple``; other values are kept. Use
        :meth:`mask` unless the caller already knows a secret is inside."""
        if isinstance(obj, str):
            return cast(T, self.mask_text(obj))
        if isinstance(obj, dict):
            return cast(T, {self.mask_tree(k): self.mask_tree(v) for k, v in obj.items()})
        if isinstance(obj, list):
            return cast(T, [self.mask_tree(v) for v in obj])
        if isinstance(obj, tuple):
            return cast(T, tuple(self.mask_tree(v) for v in obj))
        return obj


def _resolved(value: str) -> str | None:
    """``value``, or the variable it names when it is ``os.environ/NAME`` (``None`` if unset)."""
    if value.startswith(ENV_PREFIX):
        return os.environ.get(value[len(ENV_PREFIX) :])
    return value


def url_passwords(text: str) -> list[str]:
    """The passwords in ``text``, a URL or comma-separated URLs (``scheme://user:password@host``),
    decoded and as written when they differ; none for a URL without one or for other text."""
    found: list[str] = []
    for part in text.split(","):
        part = part.strip()
        if "://" not in part or "@" not in part:
            continue
        try:
            netloc = urlsplit(part).netloc
        except ValueError:  # not a URL after all
            continue
        userinfo, _, _ = netloc.rpartition("@")
        if ":" not in userinfo:
            continue
        raw = userinfo.split(":", 1)[1]
        found += [p for p in dict.fromkeys((raw, unquote(raw))) if p]
    return found


def router_file_keys(path: Path) -> list[Secret]:
    """The ``api_key`` (resolved) and ``api_base`` passwords of every deployment in a router file
    (YAML or TOML, LiteLLM's ``model_list[].litellm_params``). An unreadable or malformed file
    yields none: ``agents.llm.config.load_router_file`` reports it where a model needs it."""
    try:
        text = path.read_text(encoding="utf-8")
        if path.suffix.lower() == ".toml":
            data: Any = tomllib.loads(text)
        else:
            import yaml  # type: ignore[import-untyped]  # lazy: only with a router file; no stubs

            data = yaml.safe_load(text)
    except Exception:  # unreadable or malformed: reported by the LLM configuration instead
        logger.debug("router file %s not read for its keys", path, exc_info=True)
        return []
    found: list[Secret] = []
    entries = data.get("model_list") if isinstance(data, dict) else None
    for i, entry in enumerate(entries if isinstance(entries, list) else []):
        params = entry.get("litellm_params") if isinstance(entry, dict) else None
        if not isinstance(params, dict):
            continue
        name = entry.get("model_name") or i
        key = params.get("api_key")
        resolved = _resolved(str(key)) if key is not None else None
        if resolved:
            found.append(Secret(f"{path.name} (api_key of {name})", resolved))
        if isinstance(params.get("api_base"), str):
            where = f"{path.name} (api_base password of {name})"
            found += [Secret(where, p) for p in url_passwords(params["api_base"])]
    return found


def configured_secrets(settings: Settings, *, environ: Mapping[str, str] | None = None) -> list[Secret]:
    """Every secret value ``settings`` and ``environ`` (default ``os.environ``) configure (the
    module docstring lists the sources), each once, whatever its length."""
    env = os.environ if environ is None else environ
    found: list[Secret] = []
    for name, (group, attribute) in flat_fields().items():  # every group's fields, flat-named
        value = getattr(getattr(settings, group), attribute)
        source = f"FINAGENT_{name.upper()}"
        if isinstance(value, SecretStr):
            resolved = _resolved(value.get_secret_value())
            if resolved:
                found.append(Secret(source, resolved))
        elif isinstance(value, str):
            found += [Secret(f"{source} (password)", p) for p in url_passwords(value)]
    for dep in settings.llm.llm_deployments:
        where = f"FINAGENT_LLM_DEPLOYMENTS {dep.model_name}"
        if dep.api_key is not None:
            resolved = _resolved(dep.api_key.get_secret_value())
            if resolved:
                found.append(Secret(f"{where} (api_key)", resolved))
        if dep.api_base:
            found += [Secret(f"{where} (api_base password)", p) for p in url_passwords(dep.api_base)]
    if settings.llm.llm_router_file is not None:
        found += router_file_keys(settings.llm.llm_router_file)
    for name, value in env.items():
        if value and (PROVIDER_KEY_ENV_RE.search(name) or name in FLOWER_SECRET_ENV):
            found.append(Secret(name, value))
    for pair in env.get("FLOWER_BASIC_AUTH", "").split(","):
        user, sep, password = pair.partition(":")
        if sep and password:
            found.append(Secret(f"FLOWER_BASIC_AUTH (password of {user})", password))
    unique: dict[str, Secret] = {}
    for secret in found:
        unique.setdefault(secret.value, secret)
    return list(unique.values())


_lock = threading.Lock()
_building = threading.local()
_extra: list[Secret] = []
#: Bumped by :func:`register_secrets`: a masker built from an older list is not cached.
_generation = 0
#: Values already warned about as too short: one warning per value and process.
_warned: set[str] = set()
#: (the settings object it was built for, the masker); rebuilt when ``get_settings`` returns
#: another object (tests clear its cache) or :func:`register_secrets` adds values.
_current: tuple[Settings, SecretMasker] | None = None


def register_secrets(source: str, values: Iterable[str]) -> None:
    """Add secret ``values`` known only at run time (``source`` names them in warnings), e.g.
    the ``--basic-auth`` passwords of ``finagent flower``; they are masked from now on."""
    global _current, _generation
    with _lock:
        known = {s.value for s in _extra}
        added = [Secret(source, v) for v in dict.fromkeys(values) if v and v not in known]
        if added:
            _extra.extend(added)
            _generation += 1
            _current = None


def current_masker() -> SecretMasker:
    """The process's masker for :func:`core.settings.get_settings` (built on first use
    and again after the settings changed; a too-short value is warned about, by the name of its
    setting, the first time a build meets it).

    Raises what ``get_settings`` raises (``pydantic.ValidationError`` for invalid settings).
    While it is being built, a log record made by the build itself (this thread) gets the
    previous masker, or an empty one: the build never waits for itself.
    """
    global _current
    settings = get_settings()
    cached = _current
    if cached is not None and cached[0] is settings:
        return cached[1]
    if getattr(_building, "active", False):
        return cached[1] if cached is not None else SecretMasker()
    _building.active = True
    try:
        with _lock:
            generation = _generation
            unique: dict[str, Secret] = {}
            for secret in configured_secrets(settings) + _extra:
                unique.setdefault(secret.value, secret)
            secrets = list(unique.values())
        masker = SecretMasker(s.value for s in secrets)
        with _lock:
            if _generation == generation:  # else a value was registered meanwhile: build again
                _current = (settings, masker)
    finally:
        _building.active = False
    for secret in secrets:
        if len(secret.value) < MIN_SECRET_LENGTH and secret.value not in _warned:
            _warned.add(secret.value)
            logger.warning(
                "the secret of %s is shorter than %d characters: it is not masked by value "
                "(docs/security.md, Secrets); use a longer one",
                secret.source,
                MIN_SECRET_LENGTH,
            )
    return masker


def mask_text(text: str) -> str:
    """``text`` with the process's secrets masked (:meth:`SecretMasker.mask_text`)."""
    masker = current_masker()
    return masker.mask_text(text) if masker else text


def mask[T](obj: T) -> T:
    """``obj`` with the process's secrets masked (:meth:`SecretMasker.mask`)."""
    masker = current_masker()
    return masker.mask(obj) if masker else obj
