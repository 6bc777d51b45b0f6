"""The LLM response cache table (``llm_cache``, migration 0012): look up, store, count hits.

Why PostgreSQL (the record of truth) and not Redis: here Redis is the broker and runs without
persistence, so a restart would drop answers that cost tokens; a backtest re-run on other hosts
reads the same database its ``llm_calls`` rows go to; one primary-key read per LLM call is
negligible beside the call it replaces. Keys are sha256 digests of the request
(``agents.llm.cache.request_key``), so an entry never holds the prompt itself.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy import Engine

from db._sql import insert_if_absent, utc_now
from db.engine import begin_write, reading
from db.models import LLM_CACHE


def get_entry(*, engine: Engine, key: str) -> dict[str, Any] | None:
    """The cached ``{model, completion}`` of request ``key`` (a sha256 hex digest), or ``None``."""
    stmt = sa.select(LLM_CACHE.c.model, LLM_CACHE.c.completion).where(LLM_CACHE.c.key == key)
    with reading(engine) as conn:
        row = conn.execute(stmt).first()
    return None if row is None else {"model": row[0], "completion": row[1]}


def put_entry(*, engine: Engine, key: str, model: str, completion: dict[str, Any]) -> bool:
    """Store the answer ``completion`` (JSON) of request ``key`` on ``model``; the first answer
    of a key wins (``ON CONFLICT DO NOTHING``: two workers asking the same question at once both
    store, one row stays). Returns ``True`` when inserted.

    Not redacted, unlike ``llm_calls.response``: a cached answer must come back byte for byte,
    and ``db.redact`` masks ``name: value`` text such as a JSON answer's ``"key_levels": [...]``.
    An answer holds no credential: keys travel in request headers, prompts are tool outputs.
    """
    values = {"key": key, "model": model, "completion": completion, "created_at": utc_now(), "hits": 0}
    with begin_write(engine) as conn:
        return insert_if_absent(conn, LLM_CACHE, values)


def count_hit(*, engine: Engine, key: str) -> None:
    """Add one to the ``hits`` of ``key`` (statistics only; a missing key changes nothing)."""
    with begin_write(engine) as conn:
        conn.execute(sa.update(LLM_CACHE).where(LLM_CACHE.c.key == key).values(hits=LLM_CACHE.c.hits + 1))
