"""The chain of one pass, built from the stage table (``core.stages``).

Signatures are made by task NAME (``app.signature("finagent.research")``), so producers
(CLI, HTTP, Python API, watchlists, ``should_continue``) need not import the task modules: the
routes in ``tasks.app`` send each one to its stage's queue, and workers (and the
embedded in-process worker) register the tasks from ``tasks/``. This keeps the layers one-way:
``tasks`` imports ``pipeline``, never the reverse (Celery "Signatures": a signature needs only
the task name; canvas guide).
"""

from __future__ import annotations

from typing import Any

from celery import chain
from celery.canvas import Signature

from core.stages import END_OF_PASS, STAGES, TASK_PREFIX, stage
from core.state import FinancialAgentState
from tasks.app import app, state_argsrepr

#: Runs after the last stage of a pass: ends the analysis or re-enqueues the next pass.
SHOULD_CONTINUE_TASK = f"{TASK_PREFIX}should_continue"
#: The chain's error callback: marks the analysis failed with the failing stage and error.
CHAIN_FAILED_TASK = f"{TASK_PREFIX}chain_failed"


#: Stage tasks ignore their results (``tasks.stages``), but a producer that sends a
#: task by name writes ``ignore_result=False`` into the message unless told, and the message's
#: value wins over the task's: their signatures say it, the first as the rest.
_STAGE_TASK_NAMES = frozenset(spec.task_name for spec in STAGES)


def build_chain(state: FinancialAgentState, *, start: str | None = None) -> Signature:
    """The chain of one pass for ``state``: every stage of ``STAGES`` from ``start`` (default:
    the first) in order; the last stage's task ends the pass itself when the pass ends the
    analysis (``pipeline.stages.ending``: one hop and one commit fewer than a task of its own),
    and sends the ``should_continue`` task when another pass follows
    (``pipeline.steps.close.hand_on``). ``start=END_OF_PASS`` is the ``should_continue`` task
    alone (that hand-off, or a re-drive of a pass whose last stage completed but whose hand-off
    to the next pass was lost, ``pipeline.steps.recovery``). The error callback
    (``chain_failed``) is attached to every task. Each stage task goes to the queue of the
    state's class (``state.lane``: ``research`` or ``research.batch``,
    ``core.stages.StageSpec.queue_for``).

    Raises ``KeyError`` for an unknown ``start``.
    """
    names = [spec.task_name for spec in STAGES]
    # the analysis's class picks each stage's queue (an explicit ``queue`` option wins over the
    # route, celery ``app/routes.py``); a retry goes back to the exchange and routing key it
    # came from (``Task.signature_from_request``), so the class holds for every step
    queues = {spec.task_name: spec.queue_for(state.lane) for spec in STAGES}
    if start is not None and start != END_OF_PASS:
        names = names[STAGES.index(stage(start)) :]
    elif start == END_OF_PASS:
        names = [SHOULD_CONTINUE_TASK]
    first, *rest = names
    message = state.to_message()
    # Flower shows a task's args; the state is 6-10 KB, so every step of the pass says which
    # analysis it is in a short form (the next steps' args are the previous step's result)
    short: dict[str, Any] = {"argsrepr": state_argsrepr(message), "kwargsrepr": "{}"}

    def options(name: str) -> dict[str, Any]:
        if name in _STAGE_TASK_NAMES:
            return {**short, "ignore_result": True, "queue": queues[name]}
        return short

    sig = chain(
        app.signature(first, args=(message,), options=options(first)),
        *(app.signature(name, options=options(name)) for name in rest),
    )
    sig.on_error(app.signature(CHAIN_FAILED_TASK, kwargs={"analysis_id": state.analysis_id}))
    return sig
