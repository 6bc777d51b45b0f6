"""The recovery sweep: analyses that made no progress within their lease, or whose message the
broker lost, are re-driven from their row, at most ``max_recoveries`` times, then failed
``STALLED`` (docs/architecture.md, "Durability"; docs/operations.md).

The ``analyses`` row says where an analysis is (``db.ledger``): its ``checkpoint`` (the
last completed stage of the pass), the state after it, and a lease. A lease runs out when a
worker died holding the step (``kill -9``, an out-of-memory kill, a host lost) or when the
message of the next step was lost (Redis without persistence restarted, a publish that failed
during a database or broker outage). :func:`sweep` then takes the row (one guarded ``UPDATE``,
so two sweepers never re-drive the same analysis) and publishes the chain from the step after
the checkpoint (the task queue's ``chain(state, start=...)``, ``tasks.chain.build_chain``). A
copy of the old message that still shows up is dropped by the step claim, so a re-drive never
runs a stage twice in parallel.

One exception keeps backlogs alive: an analysis WAITING for a step (no worker holds it) whose
queue still holds messages and is consumed by a live worker is behind a backlog, not lost; its
lease is extended instead (``waiting behind N messages``). It is re-driven once its queue has
drained and it still has not started. A queue that holds messages but that no worker consumes
(every worker dead, or none started for that queue) is not a backlog being served: waiting
would extend the lease forever, so the analysis is re-driven and, past its recoveries, failed
``STALLED`` like any other (the detail names the queue nobody consumes). Nor is a queue that is
consumed but does not drain: a message that kills its worker process every time is put back
(``task_reject_on_worker_lost``) and taken again forever, so once an analysis has made no
progress (its row's ``updated_at``, which a backlog wait leaves alone) for longer than
``backlog_wait_seconds`` (default one hour), it is re-driven and failed like the others.

Waiting for the lease is needless when the broker itself lost its messages (a Redis restart
without persistence): then every unfinished analysis, queued, between two steps or running,
that has no message left in the broker is lost, not a backlog. :func:`redrive_lost` re-drives
those at once, whatever their lease, from what the broker holds
(``pipeline.steps.inventory``): an analysis counts as lost only when two readings some
seconds apart find no message for it (queued, or delivered to a worker and unacknowledged) and
its row did not move in between; the take is guarded by the row as read, so a step a worker
claims or completes meanwhile is never re-driven. Should a worker still run the step (its
message gone with the broker), its checkpoint fails the lease fence and writes nothing.

Both run in the recovery sweeper (``apps.sweeper``, ``finagent sweeper``), a process of its
own, so a worker that cannot run tasks cannot stop them; and by hand with ``finagent recover
[--dry-run]``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from core.settings import Settings
from core.stages import CONTROL_QUEUE, END_OF_PASS, stage, step_after
from core.state import FinancialAgentState
from db import ledger, progress_repo
from db._sql import utc_now
from db.engine import get_engine
from pipeline import taskqueue
from pipeline.steps.close import fail_analysis
from pipeline.steps.inventory import BrokerInventory, broker_inventory
from pipeline.steps.progress import Progress as Progress  # re-exported: readers import it from here too
from pipeline.steps.progress import lease_end_text
from pipeline.steps.progress import progress_of as progress_of

logger = logging.getLogger("finagent.recovery")


class Action(StrEnum):
    """What the sweep does (or, in a dry run, would do) with a stalled analysis."""

    REDRIVE = "redrive"
    FAIL = "fail"
    WAIT = "wait"  # waiting behind a backlog in its queue: the lease is extended


@dataclass(frozen=True)
class Recovery:
    """One stalled analysis and what the sweep did with it.

    Attributes:
        analysis_id, symbol: the analysis. status: its status when found.
        step: the step it is re-driven from (a stage name or ``should_continue``).
        stalled_since: when its lease ran out (UTC); for a message the broker lost
            (:func:`redrive_lost`), when it would have. recoveries: re-drives so far, this one
            included when ``action`` is ``redrive``.
        action: see :class:`Action`. detail: one line for people (CLI, logs).
    """

    analysis_id: str
    symbol: str
    status: str
    step: str
    stalled_since: datetime | None
    recoveries: int
    action: Action
    detail: str

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: datetimes as UTC ISO 8601."""
        out = asdict(self)
        out["stalled_since"] = self.stalled_since.isoformat() if self.stalled_since else None
        out["action"] = self.action.value
        return out


def queues_of(step: str) -> tuple[str, ...]:
    """Every Celery queue the message of ``step`` may wait in: the stage's interactive and
    batch queues (``core.stages.StageSpec.queue_for``), or control for the hand-off. The sweep
    reads both, whatever the analysis's class: a message found in either is not lost, and a
    backlog in the batch queue is the reason a batch analysis waits."""
    if step == END_OF_PASS:
        return (CONTROL_QUEUE,)
    spec = stage(step)
    return (spec.queue, spec.batch_queue)


def broker_queue_depths(queues: set[str]) -> dict[str, int]:
    """Messages ready in each of ``queues`` on the configured broker (the task queue's
    ``queue_depths``: ``LLEN`` on Redis, the AMQP ``message_count`` on RabbitMQ). A queue that
    cannot be inspected counts as empty (the sweep then re-drives; a duplicate is harmless)."""
    return taskqueue.get().queue_depths(queues)


def _publish(state: FinancialAgentState, step: str) -> None:
    taskqueue.get().chain(state, start=step).apply_async()


def consumed_queues(queues: set[str], *, timeout: float = 1.0) -> set[str] | None:
    """Which of ``queues`` some live worker consumes, from the task queue's control broadcast
    (the probe ``GET /health`` uses). ``None`` when the broadcast itself fails (then the sweep
    keeps its backlog rule: a worker it cannot see is given the benefit of the doubt); an empty
    set when no worker answered within ``timeout`` seconds."""
    return taskqueue.get().consumed_queues(queues, timeout=timeout)


def sweep(
    *,
    settings: Settings,
    dry_run: bool = False,
    now: datetime | None = None,
    queue_depths: Callable[[set[str]], Mapping[str, int]] | None = None,
    queue_consumers: Callable[[set[str]], set[str] | None] | None = None,
    publish: Callable[[FinancialAgentState, str], None] | None = None,
    limit: int = 500,
) -> list[Recovery]:
    """Find analyses whose lease ran out and re-drive or fail them (see module docstring).

    Args:
        dry_run: report what would be done, change nothing.
        now: the time leases are compared with (default: now, UTC).
        queue_depths: ``{queue: ready messages}`` for the backlog rule (default: the broker's,
            :func:`broker_queue_depths`; embedded mode passes ``lambda _: {}``).
        queue_consumers: which of the given queues a live worker consumes, asked only when a
            backlog was found (default :func:`consumed_queues`; ``None`` from it = unknown, the
            backlog rule holds). A backlog in queues nobody consumes is not waited for.
        publish: sends the chain of a re-drive (default: the task queue's ``chain(state,
            start=step).apply_async()``).
        limit: at most this many analyses per sweep (oldest lease first).

    Returns one :class:`Recovery` per stalled analysis found. Raises
    ``sqlalchemy.exc.OperationalError`` when the database is unreachable (the sweeper sweeps
    again later), the transport's connection errors when a re-drive cannot be published (the
    row taken for it is given back first).
    """
    engine = get_engine(settings.service.effective_database_url)
    now = now or utc_now()
    rows = progress_repo.stalled(engine=engine, now=now, limit=limit)
    if not rows:
        return []
    steps = {row["id"]: step_after(row["checkpoint"]) for row in rows}
    depths, unserved = _backlogs(rows, steps, queue_depths=queue_depths, queue_consumers=queue_consumers)
    done: list[Recovery] = []
    for row in rows:
        step = steps[row["id"]]
        backlog = _backlog_to_wait_for(
            row, step, depths=depths, unserved=unserved, now=now, settings=settings
        )
        recovery = _sweep_row(
            row,
            step,
            backlog=backlog,
            engine=engine,
            settings=settings,
            dry_run=dry_run,
            now=now,
            publish=publish,
        )
        if recovery is not None:
            done.append(recovery)
    return done


def _backlogs(
    rows: list[dict[str, Any]],
    steps: Mapping[str, str],
    *,
    queue_depths: Callable[[set[str]], Mapping[str, int]] | None,
    queue_consumers: Callable[[set[str]], set[str] | None] | None,
) -> tuple[Mapping[str, int], set[str]]:
    """The broker's view for :func:`sweep`'s backlog rule: ``(depths, unserved)``, the ready
    messages of each queue a waiting step (a row without a lease owner) may sit in
    (``{queue: messages}``; ``{}`` when no row waits), and which of the queues holding messages
    no live worker consumes (empty when none holds any, or when ``queue_consumers`` answers
    ``None``: unknown). ``steps`` maps each row's id to its next step. The broker is asked only
    when needed: the depths when a row waits, the consumers when a queue holds messages.
    Raises what ``queue_depths`` and ``queue_consumers`` raise."""
    waiting = {q for row in rows if row["lease_owner"] is None for q in queues_of(steps[row["id"]])}
    depths = (queue_depths or broker_queue_depths)(waiting) if waiting else {}
    backlogged = {q for q, n in depths.items() if n}
    served = (queue_consumers or consumed_queues)(backlogged) if backlogged else None
    unserved = backlogged - served if served is not None else set()
    return depths, unserved


def _backlog_to_wait_for(
    row: dict[str, Any],
    step: str,
    *,
    depths: Mapping[str, int],
    unserved: set[str],
    now: datetime,
    settings: Settings,
) -> int:
    """The messages (count) ``row``'s analysis waits behind in the queues of ``step``: 0 when
    a worker holds its lease, when its queues are empty, and when the backlog is not being
    served (no worker consumes any queue holding messages, or no progress for longer than
    ``backlog_wait_seconds``; logged as a warning). Raises nothing."""
    backlog = sum(depths.get(q, 0) for q in queues_of(step)) if row["lease_owner"] is None else 0
    held = [q for q in queues_of(step) if depths.get(q, 0)]
    # not a backlog being served: every queue holding messages for this step has no
    # consumer; or it is consumed but does not drain (a message that kills its worker
    # process is put back, task_reject_on_worker_lost, and taken again forever), which the
    # row's updated_at shows: a backlog wait leaves it alone, so it dates the last progress
    idle = (now - row["updated_at"]).total_seconds()
    not_served = (
        "but no worker consumes it"
        if all(q in unserved for q in held)
        else f"consumed, but no progress for {idle:.0f} s"
        if idle > settings.durability.backlog_wait_seconds
        else None
    )
    if backlog and not_served:
        said = f"{backlog} message(s) in {'/'.join(held)} {not_served}"
        logger.warning("analysis %s: %s; not waiting", row["id"], said)
        backlog = 0
    return backlog


def _sweep_row(
    row: dict[str, Any],
    step: str,
    *,
    backlog: int,
    engine: Any,
    settings: Settings,
    dry_run: bool,
    now: datetime,
    publish: Callable[[FinancialAgentState, str], None] | None,
) -> Recovery | None:
    """What :func:`sweep` does with one stalled ``row`` (next step ``step``): wait behind a
    ``backlog`` of messages (extend the lease by ``lease_seconds``), fail it ``STALLED`` past
    ``max_recoveries``, or take the row and re-drive it from ``step``; in a dry run only say so.
    Returns its :class:`Recovery`, or ``None`` when the take found the row moved on (another
    sweeper, or the analysis itself). Raises ``sqlalchemy.exc.OperationalError`` when the
    database is unreachable, and what a failed publish raises (the row given back first)."""
    found = dict(
        analysis_id=row["id"],
        symbol=row["symbol"],
        status=row["status"],
        step=step,
        stalled_since=row["lease_expires_at"],
    )
    if backlog:
        where = "/".join(queues_of(step))
        detail = f"waiting behind {backlog} message(s) in queue {where}; lease extended"
        if not dry_run:
            ledger.wait(engine=engine, analysis_id=row["id"], seconds=settings.durability.lease_seconds)
        return Recovery(**found, recoveries=row["recoveries"], action=Action.WAIT, detail=detail)
    if row["recoveries"] >= settings.durability.max_recoveries:
        detail = (
            f"STALLED after {row['recoveries']} recoveries: no progress in {step}, "
            f"lease ran out at {lease_end_text(row)}"
        )
        if not dry_run:
            fail_analysis(
                analysis_id=row["id"],
                stage=step,
                code="STALLED",
                message=detail,
                settings=settings,
            )
        failed = Recovery(**found, recoveries=row["recoveries"], action=Action.FAIL, detail=detail)
        logger.warning("analysis %s: %s", row["id"], detail)
        return failed
    detail = (
        f"re-driven from {step} (recovery {row['recoveries'] + 1} of {settings.durability.max_recoveries})"
    )
    if dry_run:
        return Recovery(**found, recoveries=row["recoveries"] + 1, action=Action.REDRIVE, detail=detail)
    taken = ledger.take(
        engine=engine, seen=row, lease_seconds=settings.durability.lease_seconds, expired=True, now=now
    )
    if taken is None:  # another sweeper was first, or the analysis moved on meanwhile
        return None
    _redrive(engine, taken, publish)
    logger.warning("analysis %s: lease ran out at %s; %s", row["id"], lease_end_text(row), detail)
    return Recovery(**found, recoveries=taken["recoveries"], action=Action.REDRIVE, detail=detail)


def _redrive(
    engine: Any, taken: Mapping[str, Any], publish: Callable[[FinancialAgentState, str], None] | None
) -> None:
    """Publish the chain of a row just taken for a re-drive; when the publish fails (the broker
    is unreachable), give the row back (``db.ledger.give_back``: the recovery is not
    counted, the lease runs out now, so the next sweep tries again) and re-raise."""
    state = FinancialAgentState.from_message(taken["state"])
    try:
        (publish or _publish)(state, step_after(taken["checkpoint"]))
    except Exception:
        ledger.give_back(engine=engine, taken=taken)
        raise


#: Seconds between the two readings of the broker that must both miss an analysis's message
#: before :func:`redrive_lost` counts it lost: far longer than a message spends between a
#: worker's ``BRPOP`` and its ``unacked`` entry, or between a producer's row and its publish.
LOST_SETTLE_S = 2.0


def redrive_lost(
    *,
    settings: Settings,
    inventory: Callable[[set[str]], BrokerInventory | None] | None = None,
    publish: Callable[[FinancialAgentState, str], None] | None = None,
    settle_seconds: float = LOST_SETTLE_S,
    sleep: Callable[[float], None] = time.sleep,
    dry_run: bool = False,
    limit: int = 5000,
) -> list[Recovery]:
    """After the broker lost its messages: re-drive (or, past ``max_recoveries``, fail
    ``STALLED``) every unfinished analysis the broker holds no message for, whatever its lease
    (see the module docstring).

    1. Read every unfinished row (``progress_repo.unfinished``, at most ``limit``), then the
       broker's inventory; a row is suspect when no message is for its analysis and none is
       its lease owner's task (``BrokerInventory.holds``).
    2. After ``settle_seconds``, read the suspects' rows and the inventory again: a suspect is
       lost when its row did not move (``db.ledger.UNMOVED_COLUMNS``) and the broker still
       holds nothing for it.
    3. Take each lost row guarded by the row as read (``db.ledger.take``) and publish
       the chain from the step after its checkpoint; a publish that fails gives the row back.

    Args:
        inventory: ``{queues} -> BrokerInventory`` or ``None`` when the broker cannot be
            inspected (default: ``pipeline.steps.inventory.broker_inventory``; RabbitMQ has
            none, and loses no messages).
        publish: as for :func:`sweep`. sleep: waits ``settle_seconds`` (tests pass a function
            that changes the world instead).
        dry_run: report what would be done, change nothing (the settle wait still happens).

    Returns one :class:`Recovery` per lost analysis (none when the broker has no inventory).
    Raises ``sqlalchemy.exc.OperationalError`` when the database is unreachable, the
    transport's connection errors when the broker is (a re-drive already taken is given
    back).
    """
    engine = get_engine(settings.service.effective_database_url)
    read = inventory or broker_inventory
    rows = progress_repo.unfinished(engine=engine, limit=limit)
    if not rows:
        return []
    queues = {q for row in rows for q in queues_of(step_after(row["checkpoint"]))}
    first = read(queues)
    if first is None:
        return []
    suspects = {row["id"]: row for row in rows if not first.holds(row)}
    if not suspects:
        return []
    sleep(settle_seconds)
    now_rows = progress_repo.progress_rows(engine=engine, analysis_ids=list(suspects))
    second = read(queues)
    if second is None:
        return []
    done: list[Recovery] = []
    for analysis_id, seen in suspects.items():
        row = now_rows.get(analysis_id)
        if (
            row is None
            or second.holds(row)
            or any(row[name] != seen[name] for name in ledger.UNMOVED_COLUMNS)
        ):
            continue
        step = step_after(row["checkpoint"])
        found = dict(
            analysis_id=analysis_id,
            symbol=row["symbol"],
            status=row["status"],
            step=step,
            stalled_since=row["lease_expires_at"],
        )
        lost = f"no message left in the broker for {step}"
        if row["recoveries"] >= settings.durability.max_recoveries:
            detail = f"STALLED after {row['recoveries']} recoveries: {lost} (the broker lost its messages)"
            if not dry_run:
                fail_analysis(
                    analysis_id=analysis_id, stage=step, code="STALLED", message=detail, settings=settings
                )
            logger.warning("analysis %s: %s", analysis_id, detail)
            done.append(Recovery(**found, recoveries=row["recoveries"], action=Action.FAIL, detail=detail))
            continue
        detail = (
            f"{lost}; re-driven from {step} "
            f"(recovery {row['recoveries'] + 1} of {settings.durability.max_recoveries})"
        )
        if dry_run:
            done.append(
                Recovery(**found, recoveries=row["recoveries"] + 1, action=Action.REDRIVE, detail=detail)
            )
            continue
        taken = ledger.take(
            engine=engine, seen=row, lease_seconds=settings.durability.lease_seconds, expired=False
        )
        if taken is None:  # a worker or another sweeper moved it meanwhile
            continue
        _redrive(engine, taken, publish)
        logger.warning("analysis %s: %s", analysis_id, detail)
        done.append(Recovery(**found, recoveries=taken["recoveries"], action=Action.REDRIVE, detail=detail))
    return done


def stalled_beyond_grace(*, settings: Settings, now: datetime | None = None) -> int:
    """How many unfinished analyses are past their lease by more than two sweep intervals: the
    sweep should have taken them by then, so ``GET /health`` fails while any exists."""
    now = now or utc_now()
    engine = get_engine(settings.service.effective_database_url)
    return progress_repo.count_stalled(
        engine=engine, before=now - timedelta(seconds=2 * settings.durability.sweep_seconds)
    )
