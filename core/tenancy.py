"""Tenants and scopes of the HTTP gateway: the vocabulary every layer shares.

A tenant is a name that owns analyses, watchlists (with their runs, digests and charts) and
conversation sessions. Every API key belongs to one tenant; a key only ever sees its own
tenant's objects (another tenant's object answers 404, as an unknown one: OWASP API Security
Top 10 2023, API1 "Broken Object Level Authorization"). The CLI and the Python API act as the
local administrator and work in :data:`DEFAULT_TENANT`; rows written before tenants existed
belong to it (migration 0007).

Scopes say what a key may do (OWASP API5 "Broken Function Level Authorization"):

* ``read``: every ``GET`` of analyses, charts, watchlists, runs and digests;
* ``analyze``: ``POST /analyze`` (enqueues work, may spend LLM money);
* ``watchlists``: create, change and delete watchlists and start their runs;
* ``admin``: ``GET /audit`` (the audit log of the key's tenant);
* ``operator``: the deployment operator's view across tenants, ``GET /scorecard?all_tenants=true``
  (every tenant's recommendations, model and prompt versions, and the operator's backtests).
  Never a default scope; a tenant's own keys see their own tenant's scorecard with ``read``.
"""

from __future__ import annotations

import re
from typing import Final

DEFAULT_TENANT: Final = "default"
SCOPES: Final = ("read", "analyze", "watchlists", "admin", "operator")
#: What a key created without ``--scopes`` may do: everything a key could do before scopes
#: existed, minus ``admin``.
DEFAULT_SCOPES: Final = ("read", "analyze", "watchlists")
#: The ``analyses.api_key_id`` of the analyses a scheduled (beat) watchlist run starts: not a
#: key id (those are 12 hex characters), so no key's in-flight count includes them, and the
#: tenant's daily allowance for scheduled runs counts them (``apps.metering``).
SCHEDULED_ENQUEUER: Final = "scheduled"
TENANT_RE: Final = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")


class TenancyError(ValueError):
    """A malformed tenant name or scope list (the message names the bad value)."""


def check_tenant(name: str) -> str:
    """``name`` if it is a valid tenant (1-64 of lower-case letters, digits, ``_``, ``-``,
    starting with a letter or digit). Raises :class:`TenancyError`."""
    if not TENANT_RE.fullmatch(name):
        raise TenancyError(f"tenant {name[:70]!r} must be 1-64 of lower-case letters, digits, '_' and '-'")
    return name


def parse_scopes(text: str | None) -> tuple[str, ...]:
    """The scopes of a comma-separated list (``"read,analyze"``), de-duplicated in the order of
    :data:`SCOPES`; ``None`` or empty → :data:`DEFAULT_SCOPES`. Raises :class:`TenancyError`
    naming an unknown scope."""
    if not text or not text.strip():
        return DEFAULT_SCOPES
    asked = {part.strip() for part in text.split(",") if part.strip()}
    if unknown := asked - set(SCOPES):
        raise TenancyError(f"unknown scopes {sorted(unknown)}; known: {', '.join(SCOPES)}")
    return tuple(s for s in SCOPES if s in asked)
