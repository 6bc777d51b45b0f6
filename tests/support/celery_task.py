"""For unit tests of the stage tasks' adapter (``tasks.base.StageTask``, over
``pipeline.steps.run.run_step``) without a broker: a stand-in for a bound Celery task's request,
a way to run a stage through the adapter with it, and analysis rows created as a producer does.
tests/integration and tests/fault run real workers."""

from __future__ import annotations

import uuid
from datetime import date
from types import SimpleNamespace
from typing import Any

from core.settings import get_settings
from core.state import FinancialAgentState
from db import ledger
from db.engine import get_engine
from db.migrate import ensure_schema
from pipeline.steps.delivery import Delivery
from tasks.base import Retry, StageTask


class FakeTask(StageTask):
    """Enough of a bound Celery task for ``StageTask.run_step`` (no broker here: the adapter's
    database behaviour is under test; tests/integration runs real workers): a
    :class:`~tasks.base.StageTask` whose request, app, events and retry are stand-ins."""

    # plain attributes here, where Celery's Task reads them from its request stack and its app
    request: Any = None
    app: Any = None

    def __init__(
        self,
        task_id: str = "task-1",
        *,
        allow_retry: bool = False,
        broker_url: str | None = None,
        redelivered: bool = False,
        retries: int = 0,
    ) -> None:
        self.request = SimpleNamespace(
            id=task_id, retries=retries, delivery_info={"redelivered": redelivered}
        )
        # no broker by default: every stage claims first (``runs_unclaimed`` needs a
        # broker that flags redeliveries); ``broker_url="redis://..."`` as a worker's app has
        self.app = SimpleNamespace(conf=SimpleNamespace(broker_url=broker_url))
        self.stage = ""
        self.events: list[str] = []
        self.allow_retry = allow_retry
        self.retried: list[dict[str, Any]] = []

    def send_event(self, kind: str, **_: Any) -> None:
        self.events.append(kind)

    def retry(self, **kwargs: Any) -> BaseException:
        if not self.allow_retry:
            raise AssertionError(f"no stage should retry here: {kwargs.get('exc')!r}")
        self.retried.append(kwargs)
        return Retry(exc=kwargs.get("exc"), when=kwargs.get("countdown"))


def run_stage_task(task: FakeTask, stage: str, payload: dict[str, Any], **pending: Any) -> dict[str, Any]:
    """Run ``StageTask.run_step`` as the task of ``stage`` on ``payload``, with ``task`` standing
    in for the bound Celery task (``pending``: ``pending_rows``/``pending_llm_rows``)."""
    task.stage = stage
    return task.run_step(payload, **pending)


def as_delivery(task: FakeTask, **pending: Any) -> Delivery:
    """The delivery that ``StageTask`` reads from ``task``'s request."""
    return task.delivery(**pending)


def migrated_engine() -> Any:
    """The engine of the process settings' database, migrated (embedded SQLite in tests)."""
    url = get_settings().service.effective_database_url
    ensure_schema(url=url)
    return get_engine(url)


def start_analysis_row(symbol: str = "AAPL", as_of: date = date(2012, 6, 29)) -> dict[str, Any]:
    """Create a ``queued`` analysis row as a producer does (``ledger.create_and_claim``, the
    settings' lease) and return its first message (the state research receives)."""
    state = FinancialAgentState(
        analysis_id=str(uuid.uuid4()), stock_symbol=symbol, user_query=f"Analyze {symbol}", as_of=as_of
    )
    assert ledger.create_and_claim(
        engine=migrated_engine(),
        analysis_id=state.analysis_id,
        symbol=symbol,
        as_of=as_of,
        user_query=state.user_query,
        max_iterations=state.max_iterations,
        state=state.to_message(),
        lease_seconds=get_settings().durability.lease_seconds,
    )
    return state.to_message()
