"""The chain of one pass, built from the stage table (``pipeline.core.stages``).

Signatures are made by task NAME (``app.signature("finagent.research")``), so producers
(CLI, HTTP, Python API, watchlists, ``should_continue``) need not import the task modules: the
routes in ``pipeline.celery_app`` send each one to its stage's queue, and workers (and the
embedded in-process worker) register the tasks from ``tasks/``. This keeps the layers one-way:
``tasks`` imports ``pipeline``, never the reverse (Celery "Signatures": a signature needs only
the task name; canvas guide).
"""

from __future__ import annotations

from celery import chain
from celery.canvas import Signature

from pipeline.celery_app import app
from pipeline.core.stages import STAGES, TASK_PREFIX
from pipeline.core.state import FinancialAgentState

#: Runs after the last stage of a pass: ends the analysis or re-enqueues the next pass.
SHOULD_CONTINUE_TASK = f"{TASK_PREFIX}should_continue"
#: The chain's error callback: marks the analysis failed with the failing stage and error.
CHAIN_FAILED_TASK = f"{TASK_PREFIX}chain_failed"


def build_chain(state: FinancialAgentState) -> Signature:
    """The chain of one pass for ``state``: every stage of ``STAGES`` in order, then
    ``should_continue``; the error callback (``chain_failed``) is attached to every task."""
    first, *rest = STAGES
    sig = chain(
        app.signature(first.task_name, args=(state.to_message(),)),
        *(app.signature(spec.task_name) for spec in rest),
        app.signature(SHOULD_CONTINUE_TASK),
    )
    sig.on_error(app.signature(CHAIN_FAILED_TASK, kwargs={"analysis_id": state.analysis_id}))
    return sig
