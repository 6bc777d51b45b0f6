"""Signed-in web-console sessions (``console_sessions``, migration 0021).

The console's cookie carries a random session id (``apps.api.console.session``); the
session is its row here, found by the id's SHA-256 (the table alone opens no session). A
session is live while its row exists, it has not expired (``expires_at``, the absolute end),
it was used within the idle timeout (``last_seen_at``), its key is not revoked and its key's
scopes are still those it signed in with. Sign-out deletes the row, revoking a key deletes its
key's rows (``db.ops_repo.revoke_api_key``); a scope change is caught by the comparison.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta
from typing import Any, Final

import sqlalchemy as sa
from sqlalchemy import Connection, Engine

from db._sql import fetch_one, utc_now
from db.engine import begin_write
from db.models import API_KEYS, CONSOLE_SESSIONS

SESSIONS: Final = CONSOLE_SESSIONS
#: ``last_seen_at`` is written at most this often per session (a page polls its status every few
#: seconds: one write per poll would be a write per page view).
TOUCH_EVERY: Final = timedelta(seconds=30)


def id_hash(session_id: str) -> str:
    """The row's key for the cookie's session id: SHA-256 hex (the id is 256 random bits)."""
    return hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()


def create(
    *,
    engine: Engine,
    session_id: str,
    key_id: str,
    scopes: str,
    csrf: str,
    ttl_seconds: float,
    now: datetime | None = None,
) -> None:
    """Start the session ``session_id`` of key ``key_id`` (with the key's ``scopes`` as they
    are now) that lasts at most ``ttl_seconds``; deletes the expired sessions of every key in
    the same transaction (the table stays as small as the live sessions)."""
    now = now or utc_now()
    with begin_write(engine) as conn:
        conn.execute(sa.delete(SESSIONS).where(SESSIONS.c.expires_at < now))
        conn.execute(
            sa.insert(SESSIONS).values(
                id_hash=id_hash(session_id),
                key_id=key_id,
                scopes=scopes,
                csrf=csrf,
                created_at=now,
                last_seen_at=now,
                expires_at=now + timedelta(seconds=ttl_seconds),
            )
        )


def live(
    *, engine: Engine, session_id: str, idle_seconds: float, now: datetime | None = None
) -> dict[str, Any] | None:
    """The session's row joined with its key's row (``key_*`` columns) when the session is
    live (module docstring), else ``None``; an ended session's row is deleted on the way. Moves
    ``last_seen_at`` to ``now`` when it is older than :data:`TOUCH_EVERY`."""
    now = now or utc_now()
    key = id_hash(session_id)
    row = fetch_one(
        engine,
        sa.select(
            SESSIONS,
            API_KEYS.c.revoked_at.label("key_revoked_at"),
            API_KEYS.c.scopes.label("key_scopes"),
        )
        .select_from(SESSIONS.outerjoin(API_KEYS, API_KEYS.c.key_id == SESSIONS.c.key_id))
        .where(SESSIONS.c.id_hash == key),
    )
    if row is None:
        return None
    over = (
        row["expires_at"] <= now
        or row["last_seen_at"] + timedelta(seconds=idle_seconds) <= now
        or row["key_scopes"] is None  # the key row is gone
        or row["key_revoked_at"] is not None
        or row["key_scopes"] != row["scopes"]
    )
    if over:
        with begin_write(engine) as conn:
            conn.execute(sa.delete(SESSIONS).where(SESSIONS.c.id_hash == key))
        return None
    if now - row["last_seen_at"] >= TOUCH_EVERY:
        with begin_write(engine) as conn:
            conn.execute(sa.update(SESSIONS).where(SESSIONS.c.id_hash == key).values(last_seen_at=now))
    return row


def end(*, engine: Engine, session_id: str) -> bool:
    """End the session (sign-out): delete its row. ``False`` when it had ended already."""
    with begin_write(engine) as conn:
        return end_in(conn, id_hash(session_id)) > 0


def end_in(conn: Connection, hashed: str) -> int:
    """Delete the session whose id hashes to ``hashed`` on ``conn``; the rows deleted."""
    return int(conn.execute(sa.delete(SESSIONS).where(SESSIONS.c.id_hash == hashed)).rowcount or 0)


def end_for_key(conn: Connection, key_id: str) -> int:
    """Delete every session of key ``key_id`` on ``conn`` (the caller's transaction: a key's
    revocation); the rows deleted."""
    return int(conn.execute(sa.delete(SESSIONS).where(SESSIONS.c.key_id == key_id)).rowcount or 0)


def count_for_key(*, engine: Engine, key_id: str) -> int:
    """How many session rows key ``key_id`` has (live or not yet cleaned up)."""
    found = fetch_one(engine, sa.select(sa.func.count().label("n")).where(SESSIONS.c.key_id == key_id))
    return int(found["n"]) if found else 0
