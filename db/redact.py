"""Secrets never reach a row: :func:`redact` masks credentials in what ``db.repo`` and
``db.trading_repo`` store (tool arguments and summaries, LLM requests and responses, error
texts, event data) before insert: the configured secret values themselves
(``core.masking``, whatever words surround them) and, by pattern, credentials nobody
configured here (a bearer token, ``api_key=…``, a URL's password). No database.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final, cast

from core.masking import MASK, mask_text

_SECRET_KEY_RE: Final = re.compile(r"key|secret|token|password|authorization", re.IGNORECASE)
# Keys that match the pattern above but name data, not credentials; redacting them would only
# destroy audit information (news keywords, LLM token counts).
_BENIGN_KEYS: Final = frozenset(
    {"keyword", "keywords", "max_tokens", "prompt_tokens", "completion_tokens", "total_tokens", "tokens"}
)
_MASK: Final = MASK
_AUTH_SCHEME_RE: Final = re.compile(r"\b(Bearer|Basic)\s+[A-Za-z0-9\-._~+/]{8,}=*", re.IGNORECASE)
# name=value, name: value, "name": "value" where name contains a secret word (but is not an
# exception class name such as KeyError, whose message is the missing key, not a secret).
# Every repeat is bounded and names must start at a word boundary: error texts can hold long
# blobs, and unbounded ``[\w.-]*`` around an alternation is quadratic (20 KB took 12 s).
_SECRET_PAIR_RE: Final = re.compile(
    r"(?<![\w.-])(?P<name>[\w.-]{0,40}(?:key|secret|token|password|passwd|authorization)[\w.-]{0,40})"
    r"(?<!Error)(?<!Exception)(?P<sep>[\"']?[ \t]{0,8}[:=][ \t]{0,8}[\"']?)(?P<value>[^\s\"'&,;)}\]]+)",
    re.IGNORECASE,
)
_URL_CREDENTIALS_RE: Final = re.compile(
    r"(?<![a-z0-9+.-])([a-z][a-z0-9+.-]{0,30}://[^/\s:@]{0,256}:)([^@\s/]{1,256})(@)", re.IGNORECASE
)


def _is_secret_key(key: object) -> bool:
    return isinstance(key, str) and key.lower() not in _BENIGN_KEYS and bool(_SECRET_KEY_RE.search(key))


def _redact_text(text: str) -> str:
    def pair(match: re.Match[str]) -> str:
        """Mask the value of one name=value pair unless the name is benign."""
        if match.group("name").lower() in _BENIGN_KEYS:
            return match.group(0)
        return f"{match.group('name')}{match.group('sep')}{_MASK}"

    text = mask_text(text)  # first: a configured value is masked whole, whatever surrounds it
    text = _AUTH_SCHEME_RE.sub(lambda m: f"{m.group(1)} {_MASK}", text)
    text = _SECRET_PAIR_RE.sub(pair, text)
    return _URL_CREDENTIALS_RE.sub(rf"\g<1>{_MASK}\g<3>", text)


def redact[T](obj: T) -> T:
    """A copy of ``obj`` with secrets replaced by ``"***"``, recursively.

    * ``dict``: the value of every key matching ``/key|secret|token|password|authorization/i``
      becomes ``"***"`` whatever its type; other values are redacted recursively. Exceptions:
      ``keyword(s)``, ``tokens`` and the LLM token counters (``max_tokens``, ``prompt_tokens``,
      ``completion_tokens``, ``total_tokens``), which are data.
    * ``list``/``tuple``: each item (the container type is kept).
    * ``str`` (error texts, free text): every configured secret value
      (``core.masking.mask_text``), then ``Bearer <token>``/``Basic <creds>``, ``name=value`` and
      ``name: value`` pairs whose name contains a secret word (``api_key=…``, ``"apiKey": "…"``,
      ``Authorization: …``; not ``KeyError: 'x'``), and passwords in URLs (``scheme://user:***@``).
    * anything else is returned unchanged.

    Over-redaction is accepted (``"monkey": 1`` is masked): a lost field is cheaper than a
    leaked key in a table anyone with read access can see.
    """
    if isinstance(obj, str):
        return cast(T, _redact_text(obj))
    if isinstance(obj, Mapping):
        return cast(T, {k: _MASK if _is_secret_key(k) else redact(v) for k, v in obj.items()})
    if isinstance(obj, list):
        return cast(T, [redact(v) for v in obj])
    if isinstance(obj, tuple):
        return cast(T, tuple(redact(v) for v in obj))
    return obj
