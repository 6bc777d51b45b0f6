"""The recovery sweeper: ``finagent sweeper``, a small process that runs the recovery sweep
(``pipeline.steps.recovery``) itself, independently of the workers, and says so in a heartbeat.

Why a process of its own: the sweep is what rescues analyses when workers fail. Run as a task,
it ran in the workers it was meant to rescue: a lone worker that could not allocate memory
failed every sweep task as it failed every stage, and its analyses stayed ``queued``. Beat
cannot host it either: it needs a Redis broker (redbeat's lock) and exits when Redis restarts
(``finagent beat`` starts it again), which is exactly when lost messages need re-driving. The
sweeper needs only the database and a broker connection to publish re-drives; it imports no
stage code (no pandas-ta or numba warm-up), so it is cheap to run next to every deployment.

What it does (:class:`Sweeper`):

* every ``sweep_seconds`` (and at start): :func:`pipeline.steps.recovery.sweep`, the analyses
  whose lease ran out;
* every :data:`PROBE_SECONDS` (Redis broker): looks at the marker key :data:`EPOCH_KEY`. Redis
  without persistence loses every key on a restart, the marker with the queued and unacked
  messages; a missing marker (or another sweeper's new one) means the broker lost its
  messages, and :func:`pipeline.steps.recovery.redrive_lost` re-drives at once every
  unfinished analysis that has no message left, instead of waiting for leases (up to lease +
  sweep, ~6 minutes at the defaults). The sweeper then writes a new marker. A marker that
  survives (persistence, a network blip) triggers nothing: the broker still holds the
  messages. A missing marker at the first start is the same event (harmless: the broker's
  messages are read before anything is re-driven). RabbitMQ keeps its messages over a restart
  (durable queues, persistent messages): leases alone.
* every :data:`PROBE_SECONDS` (Redis broker): the workers' heartbeats
  (``tasks.worker_heartbeat``). A worker silent for ``worker_dead_seconds`` that does not
  answer a ping is dead: :func:`pipeline.steps.recovery.redrive_orphaned` re-drives at once the
  analyses whose only messages were the deliveries it held, which the broker would otherwise
  return only after the visibility timeout and the sweep only after the lease (~6 minutes at
  the defaults). RabbitMQ requeues a dead consumer's deliveries itself when its connection
  closes.
* after each sweep: a heartbeat row (``db.heartbeat_repo``, kind :data:`HEARTBEAT_KIND`) that
  ``GET /health`` reads (:func:`heartbeat_check`).

Several sweepers are harmless (every re-drive is one guarded ``UPDATE``; a second one finds the
row taken) but pointless: run one per deployment. An error (database or broker unreachable)
is logged and the next round tries again; the process only stops on SIGTERM/SIGINT.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any, Final, Protocol

import redis
import sqlalchemy as sa

from core.settings import Settings
from db import heartbeat_repo
from db._sql import utc_now
from db.engine import get_engine
from db.redis_store import new_client
from pipeline import taskqueue
from pipeline.steps.orphans import OrphanSweep, WorkerBeat, redrive_orphaned, worker_beats
from pipeline.steps.recovery import Action, Recovery, redrive_lost, sweep

logger = logging.getLogger("finagent.recovery")

#: Seconds between two looks at the broker's marker: how late a broker that lost its messages
#: is noticed at most (plus the two readings of ``redrive_lost``, 2 s apart).
PROBE_SECONDS: Final = 5.0
#: The Redis key whose absence says the broker lost its data since a sweeper wrote it.
EPOCH_KEY: Final = "finagent:broker-epoch"
#: ``service_heartbeats.kind`` of the sweeper's rows.
HEARTBEAT_KIND: Final = "sweeper"
#: Seconds a heartbeat may be late beyond two sweep intervals before ``GET /health`` fails (a
#: slow sweep on a loaded host, a database that answered slowly).
HEARTBEAT_GRACE_S: Final = 30.0


def heartbeat_limit(settings: Settings) -> float:
    """Seconds after which the sweeper's last heartbeat counts as stale: two sweep intervals
    plus :data:`HEARTBEAT_GRACE_S`."""
    return 2 * settings.durability.sweep_seconds + HEARTBEAT_GRACE_S


class BrokerWatch(Protocol):
    """What the loop asks of a broker watch (:class:`BrokerEpoch` on Redis)."""

    def lost(self) -> bool:
        """Whether the broker lost its messages since the last call."""
        ...

    def close(self) -> None:
        """Release its connections."""
        ...


class BrokerEpoch:
    """The marker key :data:`EPOCH_KEY` in the Redis broker (its database of the broker URL)."""

    def __init__(self, url: str) -> None:
        """A client for ``url`` (short socket timeouts: a dead Redis must not hold the loop)."""
        self._client = new_client(url, socket_timeout=5, socket_connect_timeout=3)
        self._seen: bytes | str | None = None

    def lost(self) -> bool:
        """Whether the broker lost its data since the last call: the marker is missing (a new
        one is written: ``SET NX``, so of several sweepers one writes it) or is not the one
        seen last time (another sweeper replaced it). The first call finds no loss when the
        marker exists. Raises ``redis.RedisError`` when Redis does not answer."""
        value = self._client.get(EPOCH_KEY)
        if value is None:
            self._client.set(EPOCH_KEY, f"{uuid.uuid4()} {utc_now().isoformat()}", nx=True)
            self._seen = self._client.get(EPOCH_KEY)
            return True
        changed = self._seen is not None and value != self._seen
        self._seen = value
        return changed

    def close(self) -> None:
        """Close the client's connections."""
        self._client.close()


#: Looks at the orphans of a dead worker at most this many times while some of its analyses
#: keep moving (or a live worker does not beat in time); then their leases decide.
ORPHAN_TRIES: Final = 3


class DeadWorkers:
    """Tells which workers died since the last call: a worker heartbeat
    (``tasks.worker_heartbeat``) older than ``worker_dead_seconds`` whose worker does not
    answer a Celery ping within a second. Each heartbeat is judged dead once."""

    def __init__(
        self,
        *,
        settings: Settings,
        beats: Callable[[], list[WorkerBeat]] | None = None,
        ping: Callable[[list[str]], set[str]] | None = None,
    ) -> None:
        """``beats``: the heartbeats (default ``recovery.worker_beats``); ``ping``: which of the
        given Celery hostnames answer (default: the task queue's ``ping``)."""
        self.settings = settings
        self.beats = beats or (lambda: worker_beats(settings=settings))
        self.ping = ping or _ping
        self.judged: set[tuple[str, datetime]] = set()

    def newly_dead(self, *, now: datetime | None = None) -> list[WorkerBeat]:
        """The workers found dead now (not reported before). Raises what the database or the
        broker raise (the caller logs it and looks again)."""
        now = now or utc_now()
        limit = timedelta(seconds=self.settings.durability.worker_dead_seconds)
        silent = [
            b for b in self.beats() if now - b.beat_at >= limit and (b.name, b.beat_at) not in self.judged
        ]
        if not silent:
            return []
        answered = self.ping([b.hostname for b in silent if b.hostname])
        dead = [b for b in silent if b.hostname not in answered]
        self.judged |= {(b.name, b.beat_at) for b in dead}
        for beat in dead:
            logger.warning(
                "recovery sweeper: worker %s (%s) stopped heartbeating at %s and does not answer a ping: "
                "it is dead; re-driving what it held",
                beat.hostname,
                beat.name,
                beat.beat_at.isoformat(timespec="seconds"),
            )
        return dead


def _ping(hostnames: list[str]) -> set[str]:
    """Which of ``hostnames`` answer a Celery ping within one second."""
    return taskqueue.get().ping(hostnames, timeout=1.0)


def _summary(found: Sequence[Recovery]) -> dict[str, int]:
    return {
        "found": len(found),
        "redriven": sum(1 for r in found if r.action is Action.REDRIVE),
        "failed": sum(1 for r in found if r.action is Action.FAIL),
        "waiting": sum(1 for r in found if r.action is Action.WAIT),
    }


class Sweeper:
    """One sweeper's loop (see the module docstring). :meth:`step` does what is due and
    returns; :meth:`run` repeats it until stopped.

    Args:
        settings: the process settings (service mode).
        clock: monotonic seconds (tests pass their own).
        lease_sweep / lost_sweep: the two sweeps (default: ``recovery.sweep`` and
            ``recovery.redrive_lost`` with ``settings``).
        epoch: the broker marker (default: a :class:`BrokerEpoch` on a Redis broker, none on
            another broker).
    """

    def __init__(
        self,
        *,
        settings: Settings,
        clock: Callable[[], float] = time.monotonic,
        lease_sweep: Callable[[], list[Recovery]] | None = None,
        lost_sweep: Callable[[], list[Recovery]] | None = None,
        epoch: BrokerWatch | None = None,
        dead_workers: DeadWorkers | None = None,
        orphan_sweep: Callable[[], OrphanSweep] | None = None,
    ) -> None:
        """Nothing runs yet; the first :meth:`step` sweeps at once. ``dead_workers`` and
        ``orphan_sweep``: the dead-worker watch (default on a Redis broker: :class:`DeadWorkers`
        and ``recovery.redrive_orphaned``)."""
        self.settings = settings
        self.clock = clock
        self.lease_sweep = lease_sweep or (lambda: sweep(settings=settings))
        self.lost_sweep = lost_sweep or (lambda: redrive_lost(settings=settings))
        broker = str(settings.service.broker_url or "")
        redis_broker = broker.startswith(("redis://", "rediss://"))
        self.epoch: BrokerWatch | None = epoch or (BrokerEpoch(broker) if redis_broker else None)
        self.dead_workers = dead_workers or (DeadWorkers(settings=settings) if redis_broker else None)
        self.orphan_sweep = orphan_sweep or (lambda: redrive_orphaned(settings=settings))
        self.orphan_tries = 0
        self.host = socket.gethostname()
        self.pid = os.getpid()
        self.started_at = utc_now()
        self.next_sweep = clock()
        self.lost_pending = False
        self.detail: dict[str, Any] = {
            "sweep_seconds": settings.durability.sweep_seconds,
            "broker_watch": "redis marker" if self.epoch else "none (leases only)",
            "last_sweep": None,
            "broker_lost_messages_at": None,
            "last_lost_sweep": None,
            "dead_workers": [],
            "last_orphan_sweep": None,
            "error": None,
        }

    def _error(self, what: str, exc: Exception) -> None:
        text = f"{what}: {type(exc).__name__}: {str(exc)[:300]}"
        self.detail["error"] = {"at": utc_now().isoformat(timespec="seconds"), "what": text}
        logger.warning("recovery sweeper: %s", text)

    def _heartbeat(self) -> None:
        try:
            heartbeat_repo.beat(
                engine=get_engine(self.settings.service.effective_database_url),
                kind=HEARTBEAT_KIND,
                host=self.host,
                pid=self.pid,
                started_at=self.started_at,
                detail=self.detail,
            )
        except Exception as exc:  # the database is away: /health says so by the heartbeat's age
            self._error("heartbeat not written", exc)

    def step(self) -> float:
        """Do what is due now: look at the broker's marker, re-drive lost messages when the
        broker lost them (again at the next step while that fails), sweep expired leases
        when their interval has come; write the heartbeat after a sweep that succeeded (so its
        age is the age of the last sweep that worked). Returns the seconds until something is
        due again. Raises nothing (errors are logged, and the last one travels in the next
        heartbeat's ``error``)."""
        swept = False
        if self.epoch is not None:
            try:
                if self.epoch.lost():
                    self.lost_pending = True
                    self.detail["broker_lost_messages_at"] = utc_now().isoformat(timespec="seconds")
                    logger.warning(
                        "recovery sweeper: the broker lost its messages (marker %s gone)", EPOCH_KEY
                    )
            except redis.RedisError as exc:
                self._error("broker marker unreadable", exc)
        if self.lost_pending:
            try:
                found = self.lost_sweep()
            except Exception as exc:
                self._error("re-drive of lost messages failed (tried again)", exc)
            else:
                self.lost_pending = False
                self.detail["last_lost_sweep"] = {
                    "at": utc_now().isoformat(timespec="seconds"),
                    **_summary(found),
                }
                swept = True
        if self.dead_workers is not None:
            try:
                dead = self.dead_workers.newly_dead()
            except Exception as exc:
                self._error("worker heartbeats unreadable", exc)
            else:
                if dead:
                    self.orphan_tries = ORPHAN_TRIES
                    seen = utc_now().isoformat(timespec="seconds")
                    self.detail["dead_workers"] = [
                        *self.detail["dead_workers"][-9:],
                        *(
                            {"worker": b.hostname, "last_beat": b.beat_at.isoformat(), "found_at": seen}
                            for b in dead
                        ),
                    ]
        if self.orphan_tries:
            try:
                orphans = self.orphan_sweep()
            except Exception as exc:
                self._error("re-drive of a dead worker's analyses failed (tried again)", exc)
            else:
                done = orphans.judged and not orphans.remaining
                self.orphan_tries = 0 if done else self.orphan_tries - 1
                self.detail["last_orphan_sweep"] = {
                    "at": utc_now().isoformat(timespec="seconds"),
                    **_summary(orphans.recoveries),
                    "left": orphans.remaining,
                }
                if orphans.recoveries:
                    logger.warning(
                        "recovery sweeper: a dead worker's analyses: %s", _summary(orphans.recoveries)
                    )
                swept = True
        if self.clock() >= self.next_sweep:
            self.next_sweep = self.clock() + self.settings.durability.sweep_seconds
            try:
                found = self.lease_sweep()
            except Exception as exc:
                self._error("sweep failed", exc)
            else:
                self.detail["last_sweep"] = {"at": utc_now().isoformat(timespec="seconds"), **_summary(found)}
                if found:
                    logger.info("recovery sweeper: %s", _summary(found))
                swept = True
        if swept:
            self._heartbeat()
        probe = PROBE_SECONDS if self.epoch is not None else float(self.settings.durability.sweep_seconds)
        return max(0.0, min(probe, self.next_sweep - self.clock()))

    def run(self, stop: threading.Event) -> None:
        """:meth:`step` until ``stop`` is set (waiting between steps on the event, so a stop
        is immediate)."""
        logger.info(
            "recovery sweeper started on %s (pid %d): sweep every %d s, broker watch: %s",
            self.host,
            self.pid,
            self.settings.durability.sweep_seconds,
            self.detail["broker_watch"],
        )
        while not stop.is_set():
            stop.wait(self.step())
        if self.epoch is not None:
            self.epoch.close()
        logger.info("recovery sweeper stopped")


def heartbeat_check(*, settings: Settings, now: datetime | None = None) -> str:
    """``GET /health``'s ``sweeper`` check: ``ok (...)`` when the newest sweeper heartbeat is
    younger than :func:`heartbeat_limit` (with its age, the sweeper's name and what it last
    did), otherwise what is wrong and what to do. Embedded mode has no sweeper (``finagent
    recover`` sweeps by hand): ``ok (embedded ...)``. Reads the database: raises
    ``sqlalchemy.exc.SQLAlchemyError`` when it cannot (the caller reports ``unknown``)."""
    if settings.service.mode == "embedded":
        return "ok (embedded mode: no sweeper; `finagent recover` re-drives by hand)"
    now = now or utc_now()
    row = heartbeat_repo.latest(
        engine=get_engine(settings.service.effective_database_url), kind=HEARTBEAT_KIND
    )
    if row is None:
        return "no recovery sweeper has run against this database: start `finagent sweeper`"
    age = (now - row["beat_at"]).total_seconds()
    if age > heartbeat_limit(settings):
        return (
            f"the recovery sweeper's last sweep is {age:.0f} s old ({row['name']}; it sweeps every "
            f"{settings.durability.sweep_seconds} s): is `finagent sweeper` running, and can it reach the "
            "database? (its log says why a sweep failed)"
        )
    detail = row["detail"] or {}
    said = [f"swept {max(0.0, age):.0f} s ago by {row['name']}"]
    if detail.get("broker_lost_messages_at"):
        lost = detail.get("last_lost_sweep") or {}
        said.append(
            f"broker lost its messages at {detail['broker_lost_messages_at']}, "
            f"{lost.get('redriven', 0)} re-driven, {lost.get('failed', 0)} failed STALLED"
        )
    error = detail.get("error") or {}
    if error and datetime.fromisoformat(error["at"]) >= now - timedelta(seconds=heartbeat_limit(settings)):
        said.append(f"error at {error['at']}: {error['what']}")
    return f"ok ({'; '.join(said)})"


def sweeper_check(*, settings: Settings) -> str:
    """:func:`heartbeat_check`, or ``unknown: <error>`` when the database cannot answer it
    (a database without migration 0015)."""
    try:
        return heartbeat_check(settings=settings)
    except sa.exc.SQLAlchemyError as exc:
        return f"unknown: {type(exc).__name__}"
