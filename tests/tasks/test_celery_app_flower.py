"""What Flower shows: short arguments of state tasks, quiet housekeeping tasks."""

from __future__ import annotations

from datetime import date

from core.state import FinancialAgentState
from tasks.app import QUIET_TASKS, _short_argsrepr, app, state_argsrepr
from tasks.chain import build_chain

AID = "5f0c1d2e-0000-4000-8000-000000000001"


def _big_state(iteration: int = 1) -> FinancialAgentState:
    state = FinancialAgentState(
        analysis_id=AID, stock_symbol="BRK.B", as_of=date(2012, 6, 29), iteration=iteration
    )
    # a late-stage state is 6-10 KB; saferepr cut it at 1024 characters, before the symbol
    state.messages = [{"role": "assistant", "name": "analysis", "content": "x" * 500} for _ in range(20)]
    return state


def test_state_argsrepr_names_analysis_symbol_date_and_pass_whatever_the_size() -> None:
    message = _big_state(iteration=1).to_message()
    assert len(str(message)) > 10_000
    assert state_argsrepr(message) == f"(analysis={AID} BRK.B as_of=2012-06-29 pass=2)"


def test_every_step_of_a_chain_carries_the_short_form() -> None:
    sig = build_chain(_big_state(iteration=0))
    expected = f"(analysis={AID} BRK.B as_of=2012-06-29 pass=1)"
    assert [t.options.get("argsrepr") for t in sig.tasks] == [
        expected
    ] * 4  # research, analysis, recommendation, review (it ends the pass)
    assert all(t.options.get("kwargsrepr") == "{}" for t in sig.tasks)


def test_a_retry_message_is_shortened_at_publish() -> None:
    # a retry (task.retry) republishes the state with the rows its attempt could not write
    message = _big_state().to_message()
    headers: dict = {"argsrepr": repr(message)[:1024], "kwargsrepr": "{...}"}
    body = ((message,), {"pending_rows": [{"id": 1}, {"id": 2}], "pending_llm_rows": []}, {})
    _short_argsrepr(sender="finagent.review", body=body, headers=headers)
    assert headers == {
        "argsrepr": f"(analysis={AID} BRK.B as_of=2012-06-29 pass=2)",
        "kwargsrepr": "{pending_rows=<2 rows>, pending_llm_rows=<0 rows>}",
    }


def test_other_tasks_keep_celerys_argsrepr() -> None:
    headers = {"argsrepr": "('run-1', 0)"}
    _short_argsrepr(sender="finagent.watchlists.finalize", body=(("run-1", 0), {}, {}), headers=headers)
    assert headers == {"argsrepr": "('run-1', 0)"}


def test_housekeeping_tasks_send_no_events_and_stage_tasks_do() -> None:
    import tasks.stages  # registers the tasks
    import tasks.watchlists  # noqa: F401

    assert QUIET_TASKS == {"finagent.watchlists.tick"}
    assert all(app.tasks[name].send_events is False for name in QUIET_TASKS)
    assert app.tasks["finagent.research"].send_events is True
    assert app.tasks["finagent.watchlists.finalize"].send_events is True
