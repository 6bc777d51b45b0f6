"""The stage tasks' adapter (``tasks.base.StageTask`` over ``pipeline.steps.run.run_step``), in
process on SQLite (and a dead PostgreSQL port for the outage), with the real stage functions:

- each stage claims its step and writes a checkpoint (the state after it) fenced by its lease;
  a reader mid-run sees progress, never ``done`` without a report; the last stage finishes the
  analysis in its own write, or, when another pass follows, checkpoints and sends
  ``should_continue``;
- a copy of a completed stage's message is dropped; a copy racing a live lease is dropped; an
  expired lease is taken over and the old owner's late write is fenced out;
- a redelivered message of a worker that died mid-stage runs again with the same ids;
- a step claimed more often than the attempt cap fails the analysis ``STALLED``;
- a database outage while claiming is a retry that carries the rows it could not write;
- the chain's error callback reports from the failed task's own argument and keeps error codes.
"""

from __future__ import annotations

import re
from datetime import date
from types import SimpleNamespace
from typing import Any

import pytest

from core.settings import get_settings
from core.stages import END_OF_PASS
from core.state import FinancialAgentState, Status
from db import ledger, repo
from pipeline import taskqueue
from pipeline.stages.ending import end_pass
from pipeline.stages.review import review
from pipeline.stages.table import STAGE_FUNCTIONS
from pipeline.steps import close
from pipeline.steps.backoff import OUTAGE_BACKOFF_BASE, TransientStageError, backoff_seconds
from pipeline.steps.claim import runs_unclaimed
from pipeline.steps.context import StepContext
from tasks.base import Ignore, Retry
from tasks.queue import CeleryQueue
from tasks.stages import chain_failed, should_continue_task
from tests.support.celery_task import (
    FakeTask,
    as_delivery,
    migrated_engine,
    run_stage_task,
    start_analysis_row,
)

pytestmark = pytest.mark.usefixtures("clean_settings")

_REF_RE = re.compile(r"\b[a-z_]+_[0-9a-f]{12}\b")


_engine = migrated_engine
_start = start_analysis_row


def _stage(name: str, payload: dict[str, Any], task: FakeTask | None = None) -> dict[str, Any]:
    """Run stage ``name`` on ``payload`` through the tasks' adapter (``StageTask.run_step``)."""
    return run_stage_task(task or FakeTask(f"{name}-1"), name, payload)


def _claim(analysis_id: str, step: str, owner: str) -> ledger.StepClaim:
    """Claim ``step`` of pass 0 for ``owner`` directly (another copy of the message holding it)."""
    return ledger.claim(
        engine=_engine(), analysis_id=analysis_id, iteration=0, step=step, owner=owner, lease_seconds=300
    )


def _normalise(obj: Any, analysis_id: str) -> Any:
    """``obj`` with the analysis id and every tool_call_id replaced (they differ per analysis)."""
    if isinstance(obj, dict):
        return {k: _normalise(v, analysis_id) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_normalise(v, analysis_id) for v in obj]
    if isinstance(obj, str):
        return _REF_RE.sub("<ref>", obj.replace(analysis_id, "<id>"))
    return obj


def test_each_stage_checkpoints_its_state_and_the_last_one_finishes_the_analysis() -> None:
    engine = _engine()
    payload = _start()
    analysis_id = payload["analysis_id"]
    row = repo.get_analysis(engine=engine, analysis_id=analysis_id)
    assert row is not None and (row["status"], row["checkpoint"], row["attempt"]) == ("queued", None, 0)
    seen = []
    *middle, last = STAGE_FUNCTIONS
    for name in middle:
        payload = _stage(name, payload)
        row = repo.get_analysis(engine=engine, analysis_id=analysis_id)
        assert row is not None
        seen.append((row["status"], row["checkpoint"]))
        # the row alone can re-drive the next step: the state after this stage, no owner,
        # a lease running for the next step; never a terminal status without a report
        assert row["state"] == payload
        assert (
            row["lease_owner"] is None and row["attempt"] == 0 and row["lease_expires_at"] > row["updated_at"]
        )
        assert row["report"] is None and row["finished_at"] is None and row["signal"] is None
    assert seen == [("analyzing", "research"), ("recommending", "analysis"), ("reviewing", "recommendation")]

    # the last stage ends the pass in its own task: the finished row, report included, at once
    payload = _stage(last, payload)
    assert payload["status"] == "done"  # the task's result is the reviewed state, as before
    row = repo.get_analysis(engine=engine, analysis_id=analysis_id)
    assert row is not None
    assert row["status"] == "done" and row["finished_at"] is not None
    assert row["lease_expires_at"] is None and row["checkpoint"] is None and row["lease_owner"] is None
    assert row["report"].startswith("# AAPL") and row["report_json"]["signal"] == row["signal"]
    assert row["state"]["stock_data"]["history_ref"]
    assert row["state"]["recommendation"]["signal"] == row["signal"]
    assert row["state"]["messages"][-1] == {
        "role": "assistant",
        "name": "should_continue",
        "content": "report complete",
        "status": "done",
    }
    tools = {c["tool"] for c in repo.get_tool_calls(engine=engine, analysis_id=analysis_id)}
    assert {"get_stock_data", "get_history", "technical_indicators", "calculator"} <= tools

    # a should_continue message of a chain built before (or a re-drive) changes nothing
    finished = dict(row)
    out = should_continue_task(payload)
    assert out["decision"] == "end_done"
    row = repo.get_analysis(engine=engine, analysis_id=analysis_id)
    assert row is not None
    assert (row["status"], row["report"], row["finished_at"]) == (
        finished["status"],
        finished["report"],
        finished["finished_at"],
    )
    # and a redelivered copy of the last stage is dropped by its claim
    with pytest.raises(Ignore):
        _stage(last, payload)


def test_a_last_stage_whose_pass_continues_checkpoints_and_sends_should_continue(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    engine = _engine()
    payload = _start()
    analysis_id = payload["analysis_id"]
    *middle, last = STAGE_FUNCTIONS
    for name in middle:
        payload = _stage(name, payload)

    # the pass found no stock data: the rule re-runs it (pipeline.rules, step 4)
    def without_data(*, state: FinancialAgentState, ctx: StepContext) -> FinancialAgentState:
        reviewed = review(state=state, ctx=ctx)
        reviewed.status, reviewed.stock_data = Status.REVIEWING, None
        return end_pass(reviewed, ctx=ctx)

    sent: list[tuple[int, str | None]] = []

    class Queue:
        def chain(self, state: FinancialAgentState, *, start: str | None = None) -> Any:
            return SimpleNamespace(apply_async=lambda: sent.append((state.iteration, start)))

    monkeypatch.setitem(STAGE_FUNCTIONS, last, without_data)
    monkeypatch.setattr(taskqueue, "get", Queue)
    out = _stage(last, payload)

    # the checkpoint as any stage's, no report; then the should_continue task alone
    row = repo.get_analysis(engine=engine, analysis_id=analysis_id)
    assert row is not None
    assert (row["status"], row["checkpoint"], row["iteration"]) == ("reviewing", last, 0)
    assert row["report"] is None and row["report_json"] is None and row["finished_at"] is None
    assert row["state"] == out and out["final_report"] is None
    assert sent == [(0, END_OF_PASS)]

    # that task hands off to the next pass: its row, then its chain from the first stage
    assert should_continue_task(out)["decision"] == "continue"
    row = repo.get_analysis(engine=engine, analysis_id=analysis_id)
    assert row is not None
    assert (row["status"], row["checkpoint"], row["iteration"]) == ("researching", None, 1)
    assert sent == [(0, END_OF_PASS), (1, None)]


def test_a_copy_of_a_completed_stage_is_dropped_and_writes_nothing() -> None:
    engine = _engine()
    start = _start()
    payload = _stage("research", start, FakeTask("research-1"))
    task = FakeTask("analysis-same-message")
    first = _stage("analysis", payload, task)
    rows = len(repo.get_tool_calls(engine=engine, analysis_id=payload["analysis_id"]))
    with pytest.raises(Ignore):  # the broker delivers the same message again after the commit
        _stage("analysis", payload, task)
    with pytest.raises(Ignore):  # a late copy of an earlier stage
        _stage("research", start, FakeTask("research-1"))
    assert len(repo.get_tool_calls(engine=engine, analysis_id=payload["analysis_id"])) == rows
    row = repo.get_analysis(engine=engine, analysis_id=payload["analysis_id"])
    assert row is not None and row["state"] == first and row["checkpoint"] == "analysis"


def test_a_live_lease_drops_a_racing_copy_and_an_expired_one_is_taken_over() -> None:
    engine = _engine()
    payload = _start()
    analysis_id = payload["analysis_id"]
    claim = _claim(analysis_id, "research", "worker-a")
    assert claim.outcome is ledger.ClaimOutcome.CLAIMED and claim.attempt == 1
    with pytest.raises(Ignore):  # worker-a is alive: a second copy must not run in parallel
        _stage("research", payload, FakeTask("worker-b"))
    assert repo.get_tool_calls(engine=engine, analysis_id=analysis_id) == []

    # worker-a's lease runs out (it hangs); the re-driven copy takes the step over
    assert ledger.keep(engine=engine, analysis_id=analysis_id, owner="worker-a", seconds=-1)
    out = _stage("research", payload, FakeTask("worker-b"))
    # worker-a wakes up and tries to write its checkpoint: fenced out, its state not handed on
    stale = ledger.StepEnd(
        analysis_id=analysis_id, iteration=0, step="research", owner="worker-a", state={"stale": True}
    )
    assert not ledger.complete(engine=engine, end=stale, status="analyzing", lease_seconds=300)
    row = repo.get_analysis(engine=engine, analysis_id=analysis_id)
    assert row is not None and row["state"] == out and row["checkpoint"] == "research"


def test_a_message_redelivered_after_its_worker_died_runs_again_without_duplicates() -> None:
    engine = _engine()
    payload = _stage("research", _start())
    analysis_id = payload["analysis_id"]
    # the first delivery claimed the step, ran the tools, and its worker was killed before the commit
    dead = FakeTask("analysis-1")
    _claim(analysis_id, "analysis", "analysis-1")
    before = len(repo.get_tool_calls(engine=engine, analysis_id=analysis_id))
    out = _stage("analysis", payload, dead)  # the same message (same task id) comes back
    row = repo.get_analysis(engine=engine, analysis_id=analysis_id)
    assert row is not None and row["checkpoint"] == "analysis" and row["state"] == out
    calls = repo.get_tool_calls(engine=engine, analysis_id=analysis_id)
    assert len(calls) > before
    assert len({c["id"] for c in calls}) == len(calls)


def test_a_step_claimed_more_than_the_cap_fails_the_analysis_stalled(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FINAGENT_DURABILITY_TASK_MAX_RETRIES", "0")
    monkeypatch.setenv("FINAGENT_DURABILITY_MAX_REDELIVERIES", "1")
    get_settings.cache_clear()
    engine = _engine()
    payload = _start()
    analysis_id = payload["analysis_id"]
    for _ in range(2):  # the first run and one redelivery: both killed their worker
        _claim(analysis_id, "research", "poison")
    with pytest.raises(Ignore):
        _stage("research", payload, FakeTask("poison"))
    row = repo.get_analysis(engine=engine, analysis_id=analysis_id)
    assert row is not None and row["status"] == "failed" and row["finished_at"] is not None
    assert row["error"].startswith("STALLED: stage research was started 2 times")
    assert row["state"]["errors"][-1]["code"] == "STALLED"
    assert "STALLED" in row["report"]
    assert repo.get_tool_calls(engine=engine, analysis_id=analysis_id) == []


def test_a_database_outage_while_claiming_is_a_retry_that_carries_unwritten_rows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    payload = _start()
    # nothing listens on port 1: the connection is refused, a real OperationalError
    monkeypatch.setenv("FINAGENT_SERVICE_DATABASE_URL", "postgresql+psycopg://finagent@127.0.0.1:1/finagent")
    get_settings.cache_clear()
    task = FakeTask("research-outage", allow_retry=True)
    carried = [
        {
            "tool_call_id": "get_quote_0123456789ab",
            "tool": "get_quote",
            "stage": "research",
            "status": "success",
            "attempt": 1,
            "latency_ms": 3.0,
        }
    ]
    with pytest.raises(Retry):
        run_stage_task(task, "research", payload, pending_rows=carried)
    (retry,) = task.retried
    assert type(retry["exc"]).__name__ == "OperationalError"
    assert 0 <= retry["countdown"] <= get_settings().durability.task_retry_backoff_max
    assert retry["kwargs"] == {"pending_rows": carried, "pending_llm_rows": []}


def test_a_database_outage_at_the_end_of_a_pass_retries_as_a_stage_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``should_continue`` and the stages share one retry idiom: the step raises ``RetryStep``
    with the outage countdown (equal jitter: at least half the ceiling), the task base retries
    with it, and nothing is carried (the end of a pass writes no rows of its own)."""
    payload = _start()
    monkeypatch.setenv("FINAGENT_SERVICE_DATABASE_URL", "postgresql+psycopg://finagent@127.0.0.1:1/finagent")
    get_settings.cache_clear()
    task = FakeTask("should-continue-outage", allow_retry=True, retries=2)
    with pytest.raises(Retry):
        task.step(
            lambda: close.should_continue_step(
                payload=payload, celery_task_id="t-1", retries=2, settings=get_settings()
            )
        )
    (retry,) = task.retried
    assert type(retry["exc"]).__name__ == "OperationalError"
    ceiling = min(get_settings().durability.task_retry_backoff_max, OUTAGE_BACKOFF_BASE * 2**2)
    assert ceiling // 2 <= retry["countdown"] <= ceiling
    assert retry["kwargs"] == {}


def test_later_stages_rebuild_the_history_instead_of_reloading_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    payload = _stage("research", _start())
    history_ref = payload["stock_data"]["history_ref"]
    assert payload["stock_data"]["history_check"]["digest"]
    loads: list[str] = []
    real = repo.get_tool_result

    def counting(*, engine: Any, tool_call_id: str) -> dict[str, Any] | None:
        loads.append(tool_call_id)
        return real(engine=engine, tool_call_id=tool_call_id)

    monkeypatch.setattr(repo, "get_tool_result", counting)
    first = _stage("analysis", payload)
    assert history_ref not in loads  # technical_indicators and both chart tools: no reload
    assert first["analysis"]["technical"]["indicators"]["sma_200"] is not None

    batches: list[list[str]] = []
    real_batch = repo.get_tool_results

    def counting_batch(*, engine: Any, tool_call_ids: list[str]) -> dict[str, dict[str, Any]]:
        batches.append(list(tool_call_ids))
        return real_batch(engine=engine, tool_call_ids=tool_call_ids)

    monkeypatch.setattr(repo, "get_tool_results", counting_batch)
    reviewed_from = _stage("recommendation", first)
    loads.clear()
    review_out = _stage("review", reviewed_from)
    assert loads == []  # grounding: the history rebuilt, every other cited output in one batch
    assert len(batches) == 1 and history_ref not in batches[0]
    assert reviewed_from["stock_data"]["quote_ref"] in batches[0]
    grounding = review_out["analysis"]["grounding"]
    assert grounding["numbers_checked"] > 0 and grounding["unverified"] == []


def test_the_report_is_the_same_rebuilt_or_reloaded() -> None:
    """Outputs for a fixed (symbol, as_of): later stages rebuilding the history (default) and
    reloading it from its row (the check removed, as from an older research task)."""
    engine = _engine()
    reports = []
    for keep_check in (True, False):
        payload = _stage("research", _start("MSFT", date(2010, 6, 30)))
        if not keep_check:
            del payload["stock_data"]["history_check"]
        for name in ("analysis", "recommendation", "review"):
            payload = _stage(name, payload)
        should_continue_task(payload)
        row = repo.get_analysis(engine=engine, analysis_id=payload["analysis_id"])
        assert row is not None and row["status"] == "done"
        reports.append(
            (
                _normalise(row["report_json"], payload["analysis_id"]),
                _normalise(row["report"], payload["analysis_id"]),
            )
        )
    assert reports[0] == reports[1]
    assert reports[0][0]["grounding"]["unverified"] == []


def test_chain_failed_reports_from_the_failed_tasks_argument() -> None:
    engine = _engine()
    payload = _stage("research", _start())
    request = SimpleNamespace(task="finagent.analysis", args=[payload])
    chain_failed(request, RuntimeError("boom"), None, analysis_id=payload["analysis_id"])
    row = repo.get_analysis(engine=engine, analysis_id=payload["analysis_id"])
    assert row is not None and row["status"] == "failed" and row["finished_at"] is not None
    assert "finagent.analysis failed: RuntimeError: boom" in row["error"]
    # the state of the last good stage (research), not the one stored at the start
    assert row["state"]["stock_data"]["history_ref"] == payload["stock_data"]["history_ref"]
    assert row["state"]["errors"][-1]["stage"] == "analysis"


def test_chain_failed_falls_back_to_the_stored_state() -> None:
    engine = _engine()
    payload = _start()
    chain_failed(
        SimpleNamespace(task="finagent.research", args=[]),
        ValueError("x"),
        None,
        analysis_id=payload["analysis_id"],
    )
    row = repo.get_analysis(engine=engine, analysis_id=payload["analysis_id"])
    assert row is not None and row["status"] == "failed"
    assert row["state"]["errors"][-1]["code"] == "STAGE_FAILED"


def test_chain_failed_keeps_the_error_code_of_a_transient_error() -> None:
    engine = _engine()
    payload = _stage("research", _start())
    exc = TransientStageError("429 Too Many Requests after 3 attempts", "RATE_LIMITED")
    chain_failed(
        SimpleNamespace(task="finagent.analysis", args=[payload]),
        exc,
        None,
        analysis_id=payload["analysis_id"],
    )
    row = repo.get_analysis(engine=engine, analysis_id=payload["analysis_id"])
    assert row is not None and row["status"] == "failed"
    assert row["error"].startswith("RATE_LIMITED: finagent.analysis failed: TransientStageError")
    assert row["state"]["errors"][-1]["code"] == "RATE_LIMITED"
    assert "RATE_LIMITED" in row["report"]


def test_outage_backoff_spans_the_outage_and_tool_backoff_stays_short() -> None:
    cap = get_settings().durability.task_retry_backoff_max
    for retries in range(6):
        ceiling = min(cap, OUTAGE_BACKOFF_BASE * 2**retries)
        outage = [backoff_seconds(retries, outage=True, settings=get_settings()) for _ in range(50)]
        assert all(ceiling // 2 <= c <= ceiling for c in outage)  # equal jitter: never near zero
        transient = [backoff_seconds(retries, settings=get_settings()) for _ in range(50)]
        assert all(0 <= c <= min(cap, 2 * 2**retries) for c in transient)
    # the default five retries wait at least 77 s in total: a 30 s outage does not exhaust them
    assert sum(min(cap, OUTAGE_BACKOFF_BASE * 2**n) / 2 for n in range(5)) >= 77


def test_chain_failed_leaves_an_infrastructure_failure_to_the_recovery_sweep() -> None:
    # what a publish raises when the broker is away (kombu's OperationalError, as the Celery
    # queue names its publish errors)
    (broker_away,) = [e for e in CeleryQueue().publish_errors() if e.__name__ == "OperationalError"]
    engine = _engine()
    payload = _stage("research", _start())
    # the stage committed its checkpoint, then Celery could not publish the next step (Redis away)
    exc = broker_away("Error 111 connecting to 127.0.0.1:6379. Connection refused.")
    chain_failed(
        SimpleNamespace(task="finagent.research", args=[payload]),
        exc,
        None,
        analysis_id=payload["analysis_id"],
    )
    row = repo.get_analysis(engine=engine, analysis_id=payload["analysis_id"])
    assert row is not None and row["status"] == "analyzing" and row["finished_at"] is None
    assert row["checkpoint"] == "research" and row["lease_expires_at"] is not None  # the sweep's to re-drive


_REDIS = "redis://127.0.0.1:6379/0"


def test_only_a_first_delivery_without_a_model_on_a_flagging_broker_runs_unclaimed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    state = FinancialAgentState.from_message(_start())
    settings = get_settings()

    def unclaimed(task: FakeTask, carried: bool = False) -> bool:
        rows = [{"tool_call_id": "get_quote_0123456789ab"}] if carried else None
        return runs_unclaimed(delivery=as_delivery(task, pending_rows=rows), settings=settings, state=state)

    assert unclaimed(FakeTask(broker_url=_REDIS))
    assert unclaimed(FakeTask(broker_url="amqp://guest:guest@127.0.0.1:5672//"))
    assert not unclaimed(FakeTask(broker_url=_REDIS, redelivered=True))  # a worker died with it
    assert not unclaimed(FakeTask(broker_url=_REDIS, retries=1))  # a Celery retry
    assert not unclaimed(FakeTask(broker_url=_REDIS), carried=True)  # rows of an earlier attempt
    assert not unclaimed(FakeTask(broker_url="memory://"))  # a transport that may not flag redeliveries
    assert not unclaimed(FakeTask())
    # a stage with a model claims first (its lease owner is shown while it runs)
    with_model = state.model_copy(update={"llm_model": "openai/gpt-4o-mini"})
    assert not runs_unclaimed(
        delivery=as_delivery(FakeTask(broker_url=_REDIS)), settings=settings, state=with_model
    )


def test_an_unclaimed_first_delivery_claims_and_completes_in_its_checkpoint() -> None:
    engine = _engine()
    payload = _start()
    analysis_id = payload["analysis_id"]
    out = _stage("research", payload, FakeTask("research-1", broker_url=_REDIS))
    row = repo.get_analysis(engine=engine, analysis_id=analysis_id)
    assert row is not None and row["state"] == out
    assert (row["status"], row["checkpoint"], row["attempt"], row["lease_owner"]) == (
        "analyzing",
        "research",
        0,
        None,
    )
    # a copy of the same message after the commit: the row moved on, nothing is written twice
    rows = len(repo.get_tool_calls(engine=engine, analysis_id=analysis_id))
    with pytest.raises(Ignore):
        _stage("research", payload, FakeTask("research-1", broker_url=_REDIS))
    assert len(repo.get_tool_calls(engine=engine, analysis_id=analysis_id)) == rows
    row = repo.get_analysis(engine=engine, analysis_id=analysis_id)
    assert row is not None and row["state"] == out and row["checkpoint"] == "research"


def test_an_unclaimed_copy_racing_a_live_lease_is_fenced_out_at_its_checkpoint() -> None:
    engine = _engine()
    payload = _start()
    analysis_id = payload["analysis_id"]
    # worker-a claimed the step (a redelivered copy) and is still running it
    claim = _claim(analysis_id, "research", "worker-a")
    assert claim.outcome is ledger.ClaimOutcome.CLAIMED
    # a first delivery of another copy runs without a claim; its checkpoint finds the live lease
    with pytest.raises(Ignore):
        _stage("research", payload, FakeTask("worker-b", broker_url=_REDIS))
    row = repo.get_analysis(engine=engine, analysis_id=analysis_id)
    assert row is not None and row["checkpoint"] is None and row["lease_owner"] == "worker-a"
    assert row["state"] == payload  # its state was not written
    # its tool calls happened: their rows are kept (deterministic ids, written once)
    calls = repo.get_tool_calls(engine=engine, analysis_id=analysis_id)
    assert {c["tool"] for c in calls} >= {"get_stock_data", "get_history"}
    # worker-a completes normally, its rows are the same ids (nothing duplicated)
    end = ledger.StepEnd(
        analysis_id=analysis_id,
        iteration=0,
        step="research",
        owner="worker-a",
        state={"a": 1},
        tool_calls=[{k: v for k, v in c.items() if k != "analysis_id"} for c in calls],
    )
    assert ledger.complete(engine=engine, end=end, status="analyzing", lease_seconds=300)
    assert len(repo.get_tool_calls(engine=engine, analysis_id=analysis_id)) == len(calls)


def test_an_expired_lease_does_not_fence_out_an_unclaimed_run() -> None:
    engine = _engine()
    payload = _start()
    analysis_id = payload["analysis_id"]
    _claim(analysis_id, "research", "dead")
    assert ledger.keep(engine=engine, analysis_id=analysis_id, owner="dead", seconds=-1)
    out = _stage("research", payload, FakeTask("research-2", broker_url=_REDIS))
    row = repo.get_analysis(engine=engine, analysis_id=analysis_id)
    assert row is not None and row["state"] == out and row["lease_owner"] is None


def test_the_poison_cap_counts_every_redelivery_after_an_unclaimed_first_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FINAGENT_DURABILITY_TASK_MAX_RETRIES", "0")
    monkeypatch.setenv("FINAGENT_DURABILITY_MAX_REDELIVERIES", "1")  # cap: the first run and one redelivery
    get_settings.cache_clear()
    engine = _engine()
    payload = _start()
    analysis_id = payload["analysis_id"]
    runs: list[int] = []

    def poison(**_: Any) -> Any:
        runs.append(1)
        raise SystemExit("the message kills its worker")  # not caught by the adapter

    monkeypatch.setitem(STAGE_FUNCTIONS, "research", poison)

    def deliver(redelivered: bool) -> None:
        run_stage_task(FakeTask("poison", broker_url=_REDIS, redelivered=redelivered), "research", payload)

    with pytest.raises(SystemExit):  # the first delivery runs unclaimed: the row is unchanged
        deliver(redelivered=False)
    row = repo.get_analysis(engine=engine, analysis_id=analysis_id)
    assert row is not None and (row["attempt"], row["lease_owner"]) == (0, None)
    for _ in range(2):  # every redelivery claims first: attempts 1 and 2 are within the cap
        with pytest.raises(SystemExit):
            deliver(redelivered=True)
    # the next redelivery is over the cap: the analysis fails STALLED without running again
    with pytest.raises(Ignore):
        deliver(redelivered=True)
    assert len(runs) == 3  # the cap (2) and the one unclaimed first run
    row = repo.get_analysis(engine=engine, analysis_id=analysis_id)
    assert row is not None and row["status"] == "failed"
    assert row["error"].startswith("STALLED: stage research was started 2 times")
