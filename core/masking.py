"""Known secret values, masked wherever text is stored, logged, sent or returned.

Pattern redaction (``db.redact``) recognises a credential by its surroundings (``api_key=…``,
``Bearer …``, ``scheme://user:…@``), so it cannot catch a provider that echoes a key in its own
words ("Incorrect API key provided: sk-…"). This module knows the configured values themselves
and replaces every occurrence with :data:`MASK`, whatever the wording around it
(docs/security.md, "Secrets").

Where the values come from (:func:`configured_secrets`, read once per settings object):

* every ``SecretStr`` setting (``FINAGENT_LLM_API_KEY``, ``FINAGENT_DATA_TAVILY_API_KEY``,
  ``FINAGENT_API_URL_SIGNING_KEY``, ``FINAGENT_BROKER_ALPACA_API_KEY``, ``FINAGENT_BROKER_ALPACA_SECRET_KEY``,
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

Each value is masked as written and in every form it may take (:func:`derived_forms`,
:func:`separated_pattern`): URL-, JSON-, ``repr``- and HTML-escaped, with separators inserted
(white space, ``-``, ``.``), reversed, base64 at any alignment (standard and URL-safe), hex, and
any run of :data:`RUN_LENGTH` or more of its characters. Values shorter than
:data:`MIN_SECRET_LENGTH` are not masked by value (a password ``pg`` would turn every "pg" of a
report into ``***``): a warning names their setting when the masker is built; URL passwords
among them are still masked by the URL pattern of ``db.redact``. What keeps ordinary text
unmasked is said in docs/security.md ("Secrets").

Cost: every form of every value is searched in one pass by Hyperscan (~30 µs per 100 KB here
whatever the number of secrets; ``str.__contains__`` per form was 3x slower with eight secrets
for the exact forms alone, an Aho-Corasick automaton 4-8x: bench/secret_masking.py,
docs/benchmarks.md). With no secret configured every function returns its argument at once.

Imports nothing of the project but the settings (``core`` is the ground floor).
"""

from __future__ import annotations

import base64
import functools
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

try:  # a wheel for every common platform; without it the search is per form (slower)
    import hyperscan
except ImportError:  # pragma: no cover - exercised on platforms without a wheel only
    hyperscan = None  # type: ignore[assignment]

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
#: A run of this many consecutive characters of a secret is masked (a longer secret's pieces:
#: "its first 12 characters"). Twelve random characters of a key occur in ordinary text by
#: chance with probability ~n/62^12 per position, and a value this short is masked whole anyway.
RUN_LENGTH: Final = 12
#: Characters a provider may insert between a secret's characters (ASCII white space, '-', '.').
SEPARATORS: Final = frozenset(" \t\n\r\x0b\x0c-.")
_SEPARATOR: Final = r"(?:[\x20\t\n\r\x0b\x0c.\-]|\\[nrt])"
#: Between two characters of a secret: at most one separator; where the secret has n of its own:
#: up to three per own separator, each with a space on either side (``sk-test`` spaced out is
#: ``s k - t e s t``, ``a--b`` is ``a - - b``). Bounded on purpose: Hyperscan scans ~30 µs per
#: 100 KB with these, 150-200 µs with unbounded repeats (bench/secret_masking.py).
_GAP: Final = _SEPARATOR + "?"
#: Separators a spaced-out form may show for each of the secret's own (``" - "``).
_PER_OWN: Final = 3
_URLSAFE: Final = str.maketrans("+/", "-_")
#: This service's HTTP API key, ``fa_<key_id>_<secret>`` (``apps.api.auth``): its key id is
#: public (it names the key in lists, logs and the audit log, and finds the key's row), so runs
#: are taken from the secret part only. Masking the id's 12 characters as a run broke the key's
#: own lookup in a process that had the key in its environment (``*_API_KEY``).
_SERVICE_KEY_RE: Final = re.compile(r"fa_[0-9a-f]{12}_([A-Za-z0-9_-]{20,100})")


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
    with nothing safe, its hex digits in either case, ``quote_plus``, every byte ``%XX``),
    JSON-escaped (ASCII and UTF-8 output, every character ``\\uXXXX``), Python ``repr``
    escaped, HTML-escaped. For a value of letters, digits and ``-``/``_``/``.`` the first
    ones are the value itself."""
    raw = value.encode("utf-8", "surrogatepass")
    return {
        value,
        quote(value, safe=""),
        re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), quote(value, safe="")),
        quote_plus(value, safe=""),
        "".join(f"%{b:02X}" for b in raw),
        json.dumps(value)[1:-1],
        json.dumps(value, ensure_ascii=False)[1:-1],
        "".join(f"\\u{ord(c):04x}" if ord(c) <= 0xFFFF else json.dumps(c)[1:-1] for c in value),
        repr(value)[1:-1],
        html.escape(value),
    }


def base64_cores(value: str) -> set[str]:
    """The base64 text ``value`` (UTF-8) takes inside any larger base64'd blob, standard and
    URL-safe alphabets, at each of the 3 byte alignments (the value starting at byte offset
    0, 1 or 2 of a 3-byte group): the characters whose 6 bits all come from the value's bytes,
    so they are the same whatever bytes surround it. For a value encoded alone the core is
    its encoding less at most the last 2 characters and the padding."""
    raw = value.encode("utf-8", "surrogatepass")
    cores: set[str] = set()
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + raw + b"\0\0").decode("ascii")
        first = -(-8 * offset // 6)  # the first character starting inside the value's bits
        last = 8 * (offset + len(raw)) // 6  # one past the last one ending inside them
        core = encoded[first:last]
        cores |= {core, core.translate(_URLSAFE)}
    return cores


def derived_forms(value: str) -> set[str]:
    """Every literal form of ``value`` the masker looks for (docs/security.md, "Secrets"):
    :func:`encoded_forms`, the value reversed, its UTF-8 bytes in hex (lower and upper case),
    :func:`base64_cores`, and, for a value longer than :data:`RUN_LENGTH`, every run of
    :data:`RUN_LENGTH` consecutive characters of it (a longer run contains them: the masked
    spans are merged); of this service's API key ``fa_<key_id>_<secret>`` only the secret
    part's runs (the key id is public). The value with separators inserted is a pattern, not a literal
    (:func:`separated_pattern`)."""
    raw = value.encode("utf-8", "surrogatepass")
    forms = encoded_forms(value) | base64_cores(value) | {value[::-1], raw.hex(), raw.hex().upper()}
    service_key = _SERVICE_KEY_RE.fullmatch(value)
    private = service_key.group(1) if service_key else value
    if len(private) > RUN_LENGTH:
        forms |= {private[i : i + RUN_LENGTH] for i in range(len(private) - RUN_LENGTH + 1)}
    return forms


def separated_pattern(value: str, *, possessive: bool = False) -> str | None:
    """A regular expression (Python ``re`` and Hyperscan syntax alike) for ``value`` with
    separators inserted: its significant characters (all but :data:`SEPARATORS`) in order,
    each pair with at most one separator between them (ASCII white space, ``-``, ``.``, or a
    JSON-escaped ``\\n``/``\\r``/``\\t``), where the value has n separators of its own up to
    3n (so ``sk-test`` matches ``s k - t e s t``, ``sk.test`` and ``sktest``). ``None``
    when fewer than :data:`MIN_SECRET_LENGTH` characters are significant, or all are digits
    (a digits-only secret would match ordinary numbers such as ``1234.5678``).
    ``possessive``: the gaps never give back what they took (Python ``re`` only, Hyperscan
    needs none: the character after a gap is never a separator, so nothing is lost)."""
    significant = [c for c in value if c not in SEPARATORS]
    if len(significant) < MIN_SECRET_LENGTH or all(c.isdigit() for c in significant):
        return None
    parts: list[str] = []
    gap = 0
    for char in value:
        if char in SEPARATORS:
            gap += 1
            continue
        if parts:
            between = f"{_SEPARATOR}{{0,{_PER_OWN * gap}}}" if gap else _GAP
            parts.append(between + ("+" if possessive else ""))
        parts.append("".join(f"\\x{b:02x}" for b in char.encode("utf-8", "surrogatepass")))
        gap = 0
    return "".join(parts)


@dataclass(frozen=True)
class _Compiled:
    """What a masker searches for: literal forms (longest first), separated patterns (Python),
    and one Hyperscan database of all of them (``None`` without the library)."""

    forms: tuple[str, ...]
    patterns: tuple[re.Pattern[str], ...]
    database: Any


@functools.lru_cache(maxsize=32)
def _compile(values: tuple[str, ...]) -> _Compiled:
    """The :class:`_Compiled` search of ``values`` (each at least :data:`MIN_SECRET_LENGTH`
    long), cached: tests and settings changes rebuild maskers of the same values often, and a
    Hyperscan compile costs ~15-150 ms."""
    forms: set[str] = set()
    sources: list[str] = []
    python: list[re.Pattern[str]] = []
    for value in values:
        forms |= derived_forms(value)
        pattern = separated_pattern(value)
        if pattern is not None:
            sources.append(pattern)
            python.append(re.compile(cast(str, separated_pattern(value, possessive=True))))
    ordered = tuple(sorted(forms, key=lambda f: (-len(f), f)))
    database = None
    if hyperscan is not None and (ordered or sources):
        expressions = [
            "".join(f"\\x{b:02x}" for b in form.encode("utf-8", "surrogatepass")).encode("ascii")
            for form in ordered
        ] + [source.encode("ascii") for source in sources]
        database = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        database.compile(
            expressions=expressions,
            ids=list(range(len(expressions))),
            elements=len(expressions),
            flags=hyperscan.HS_FLAG_SINGLEMATCH,
        )
    return _Compiled(ordered, tuple(python), database)


def _stop(*_: Any) -> bool:
    """Hyperscan's match callback for "is there any": stop at the first match."""
    return True


class SecretMasker:
    """Replaces known secret values, in every form :func:`derived_forms` and
    :func:`separated_pattern` describe, with :data:`MASK`.

    ``SecretMasker(values)``: values shorter than :data:`MIN_SECRET_LENGTH` are ignored.
    Every occurrence of every form is found, overlapping occurrences are merged, and each
    merged span is replaced by one :data:`MASK` (a secret that contains another, or a run
    longer than :data:`RUN_LENGTH`, is masked whole). A masker without values is falsy and
    returns every argument unchanged.

    Search: one Hyperscan scan of the text's UTF-8 bytes for every form and pattern at once
    (``hyperscan``, Intel's multi-pattern matcher; ~30 µs per 100 KB whatever the number of
    secrets, docs/benchmarks.md); without the library, ``str.__contains__`` per form and
    ``re`` per pattern (the same answers, slower).
    """

    __slots__ = ("_compiled", "_local")

    def __init__(self, values: Iterable[str] = ()) -> None:
        kept = tuple(sorted({v for v in values if len(v) >= MIN_SECRET_LENGTH}))
        self._compiled = _compile(kept) if kept else _Compiled((), (), None)
        # a Hyperscan scratch space may be used by one thread at a time: one per thread
        self._local = threading.local()

    def __bool__(self) -> bool:
        """True when there is something to mask."""
        return bool(self._compiled.forms)

    def __repr__(self) -> str:
        """The number of forms and patterns, never a value."""
        compiled = self._compiled
        return f"SecretMasker({len(compiled.forms)} forms, {len(compiled.patterns)} patterns)"

    def found_in(self, text: str) -> bool:
        """Whether ``text`` contains any secret form."""
        compiled = self._compiled
        if not compiled.forms or len(text) < MIN_SECRET_LENGTH:  # no form is shorter
            return False
        if compiled.database is None:
            return any(form in text for form in compiled.forms) or any(
                p.search(text) for p in compiled.patterns
            )
        scratch = getattr(self._local, "scratch", None)
        if scratch is None:
            scratch = self._local.scratch = hyperscan.Scratch(compiled.database)
        try:
            compiled.database.scan(
                text.encode("utf-8", "surrogatepass"), match_event_handler=_stop, scratch=scratch
            )
        except hyperscan.ScanTerminated:  # the callback stopped it: a match
            return True
        return False

    def spans(self, text: str) -> list[tuple[int, int]]:
        """The ``[start, end)`` character spans of ``text`` holding a secret form, overlapping
        ones merged, in order."""
        found: list[tuple[int, int]] = []
        for form in self._compiled.forms:
            at = text.find(form)
            while at != -1:
                found.append((at, at + len(form)))
                at = text.find(form, at + 1)
        for pattern in self._compiled.patterns:
            found += [m.span() for m in pattern.finditer(text)]
        found.sort()
        merged: list[tuple[int, int]] = []
        for start, end in found:
            if merged and start < merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], end))
            else:
                merged.append((start, end))
        return merged

    def mask_text(self, text: str) -> str:
        """``text`` with every secret form replaced by :data:`MASK` (the same object when
        nothing matched)."""
        if not self.found_in(text):
            return text
        spans = self.spans(text)
        if not spans:
            return text
        pieces: list[str] = []
        at = 0
        for start, end in spans:
            pieces += [text[at:start], MASK]
            at = end
        pieces.append(text[at:])
        return "".join(pieces)

    def mask[T](self, obj: T) -> T:
        """``obj`` with every secret form masked in its strings (dict keys included), for
        JSON-like values: ``str``, and ``dict``/``list``/``tuple`` of them at any depth (other
        leaves are kept as they are). Returns ``obj`` itself when it holds no secret (checked
        once on its JSON text, at C speed), else a masked copy (:meth:`mask_tree`)."""
        if not self:
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
    for dep in settings.llm.deployments:
        where = f"FINAGENT_LLM_DEPLOYMENTS {dep.model_name}"
        if dep.api_key is not None:
            resolved = _resolved(dep.api_key.get_secret_value())
            if resolved:
                found.append(Secret(f"{where} (api_key)", resolved))
        if dep.api_base:
            found += [Secret(f"{where} (api_base password)", p) for p in url_passwords(dep.api_base)]
    if settings.llm.router_file is not None:
        found += router_file_keys(settings.llm.router_file)
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
