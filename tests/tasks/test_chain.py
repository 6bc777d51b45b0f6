"""The chain of one pass is built from the stage table by task name (no task import)."""

from __future__ import annotations

import subprocess
import sys
from datetime import date

from core.state import FinancialAgentState
from tasks.chain import build_chain
from tests.conftest import REPO_ROOT


def test_chain_runs_every_stage_the_last_ending_the_pass_with_the_error_callback() -> None:
    state = FinancialAgentState(analysis_id="a-1", stock_symbol="AAPL", as_of=date(2012, 6, 29))
    sig = build_chain(state)
    names = [task.task for task in sig.tasks]
    assert names == [
        "finagent.research",
        "finagent.analysis",
        "finagent.recommendation",
        "finagent.review",  # ends the pass itself: no should_continue hop (pipeline.stages.ending)
    ]
    assert sig.tasks[0].args == (state.to_message(),)
    assert all(task.args == () for task in sig.tasks[1:])
    errbacks = sig.options["link_error"]
    assert [(e["task"], e["kwargs"]) for e in errbacks] == [("finagent.chain_failed", {"analysis_id": "a-1"})]


def test_a_re_drive_after_the_last_stage_is_should_continue_alone() -> None:
    state = FinancialAgentState(analysis_id="a-1", stock_symbol="AAPL", as_of=date(2012, 6, 29))
    sig = build_chain(state, start="should_continue")
    tasks = getattr(sig, "tasks", [sig])
    assert [task.task for task in tasks] == ["finagent.should_continue"]
    assert tasks[0].args == (state.to_message(),)


def test_building_a_chain_imports_no_task_module() -> None:
    """The chain names its tasks: a producer building one loads the app, not the modules that
    declare the tasks (nor the stages they run)."""
    code = (
        "import sys, datetime;"
        "from tasks.chain import build_chain;"
        "from core.state import FinancialAgentState as S;"
        "build_chain(S(analysis_id='a', stock_symbol='AAPL', as_of=datetime.date(2012, 6, 29)));"
        "print(sorted(m for m in sys.modules if m == 'tasks' or m.startswith(('tasks.', 'pipeline.stages'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "['tasks', 'tasks.app', 'tasks.chain', 'tasks.worker_heartbeat']"


def test_every_stage_message_says_its_result_is_ignored() -> None:
    # a producer sends by name; without the option the message would ask to store the result
    state = FinancialAgentState(analysis_id="a-1", stock_symbol="AAPL", as_of=date(2012, 6, 29))
    assert [task.options.get("ignore_result") for task in build_chain(state).tasks] == [True] * 4
    redrive = build_chain(state, start="should_continue")
    assert "ignore_result" not in getattr(redrive, "tasks", [redrive])[0].options


def test_each_stage_takes_the_queue_of_the_analysis_class_in_every_chain() -> None:
    interactive = FinancialAgentState(analysis_id="a-1", stock_symbol="AAPL", as_of=date(2012, 6, 29))
    batch = interactive.model_copy(update={"lane": "batch"})
    assert [t.options["queue"] for t in build_chain(interactive).tasks] == [
        "research",
        "analysis",
        "recommendation",
        "review",
    ]
    assert [t.options["queue"] for t in build_chain(batch).tasks] == [
        "research.batch",
        "analysis.batch",
        "recommendation.batch",
        "review.batch",
    ]
    # a re-drive (recovery) and the next pass are built from the stored state: the class holds
    stored = FinancialAgentState.as_received(batch.to_message())
    assert stored.lane == "batch"
    assert [t.options["queue"] for t in build_chain(stored, start="recommendation").tasks] == [
        "recommendation.batch",
        "review.batch",
    ]
    # the error callback and the hand-off stay on control
    redrive = build_chain(stored, start="should_continue")
    assert "queue" not in getattr(redrive, "tasks", [redrive])[0].options


def test_a_retry_goes_back_to_the_queue_its_message_came_from() -> None:
    # Task.retry sends the message again from its request: a batch stage's retry must not fall
    # back to the task's route (the interactive queue)
    import tasks.stages  # noqa: F401  (registers the stage tasks on the app)
    from tasks.app import app

    task = app.tasks["finagent.analysis"]
    # the request of a delivery from the batch queue, as the worker pushes it (Task.push_request)
    task.push_request(
        id="t-1",
        args=({"analysis_id": "a-1"},),
        kwargs={},
        delivery_info={"exchange": "analysis.batch", "routing_key": "analysis.batch"},
    )
    try:
        sig = task.signature_from_request()
    finally:
        task.pop_request()
    assert (sig.options["exchange"], sig.options["routing_key"]) == ("analysis.batch", "analysis.batch")
