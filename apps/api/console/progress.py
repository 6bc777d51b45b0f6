"""What the console shows of an analysis while it runs: the stage stepper (queued → research →
analysis → recommendation → review → done, each with its elapsed time) and the timeline rows of
its tool and LLM calls. Pure functions of the ``analyses`` row and its call rows; the pages
(``views``) render them and the live endpoint (``live``) sends them as JSON, so a page that
polls shows exactly what a reload would. Reference: ``docs/console.md``, "Live progress".

Where the times come from: each stage's start and end are the marks the step adapter stores
with the state (``core.state.StageMark``, ``pipeline.steps.run``); the queued time is from the
row's ``created_at`` to the first stage's start; the running step's time is counted from the
previous stage's end (it includes the wait in its queue, which no row records). Analyses
stored before the marks existed show their stages done without times.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final

from core.stages import END_OF_PASS, STAGES, TERMINAL_STATUSES, Status, step_after

#: The stepper's steps, in order: the wait for a worker, the stages of a pass, the end.
STEP_NAMES: Final = ("queued", *(spec.name for spec in STAGES), "done")
#: What a step is shown as: ``done`` (it ran), ``running`` (a worker holds it), ``waiting`` (it
#: is next and waits for a worker), ``pending`` (later), ``failed`` (the analysis failed there).
STEP_STATES: Final = ("done", "running", "waiting", "pending", "failed")


def _when(value: Any) -> datetime | None:
    """A timestamp of a row or a stage mark (a ``datetime`` or ISO 8601 text) as a datetime."""
    if value is None or isinstance(value, datetime):
        return value
    return datetime.fromisoformat(str(value))


def duration_text(seconds: float | None) -> str:
    """``seconds`` for a person: ``0.42 s`` (under 1 s), ``3.4 s`` (under 10 s), ``42 s``,
    ``2 min 05 s``, ``1 h 02 min``; ``""`` for ``None``. ``console.js`` formats the ticking
    clock of a running step the same way."""
    if seconds is None:
        return ""
    seconds = max(0.0, seconds)
    if seconds < 1:
        return f"{seconds:.2f} s"
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 60:
        return f"{seconds:.0f} s"
    whole = int(seconds)
    if whole < 3600:
        return f"{whole // 60} min {whole % 60:02d} s"
    return f"{whole // 3600} h {whole % 3600 // 60:02d} min"


def _marks(row: dict[str, Any]) -> list[dict[str, Any]]:
    state = row.get("state") if isinstance(row.get("state"), dict) else {}
    out = []
    for mark in (state or {}).get("stage_marks") or []:
        started, finished = _when(mark.get("started_at")), _when(mark.get("finished_at"))
        if started is not None and finished is not None:
            out.append({**mark, "started_at": started, "finished_at": finished})
    return out


def _failed_stage(row: dict[str, Any]) -> str | None:
    """The stage whose error failed the analysis (the last critical error's), if any."""
    state = row.get("state") if isinstance(row.get("state"), dict) else {}
    errors = [e for e in (state or {}).get("errors") or [] if e.get("critical", True)]
    return str(errors[-1].get("stage")) if errors else None


def stage_steps(row: dict[str, Any], *, now: datetime) -> dict[str, Any]:
    """The stepper of an analysis: ``row`` is a full ``analyses`` row (``state`` parsed, as
    ``db.repo.get_analysis`` returns it), ``now`` the current UTC time.

    Returns ``{pass, passes, finished, steps: [{name, state, seconds, elapsed, since,
    passes}]}``: ``pass`` the current pass (1-based) of at most ``passes``; per step (the names
    of :data:`STEP_NAMES`) its state (one of :data:`STEP_STATES`), ``seconds`` its elapsed time
    (a stage's run time summed over the passes it ran in; the wait before the first stage for
    ``queued``; the whole analysis for ``done``; ``None`` when unknown, e.g. rows stored before
    stage marks), ``elapsed`` the same as text (:func:`duration_text`), ``since`` (UTC ISO
    8601) when a running or waiting step's clock started (the page counts on from it), and
    ``passes`` how many passes ran the stage. Raises nothing for a row without marks or state."""
    status = str(row["status"])
    finished = status in {s.value for s in TERMINAL_STATUSES}
    created = _when(row.get("created_at")) or now
    marks = _marks(row)
    current = None
    if not finished and status != Status.QUEUED.value:
        current = step_after(row.get("checkpoint"))
        if current == END_OF_PASS:  # the end-of-pass hand-off belongs to the last stage
            current = STAGES[-1].name
    failed_at = _failed_stage(row) if status == Status.FAILED.value else None
    last_end = max((m["finished_at"] for m in marks), default=None)
    first_start = min((m["started_at"] for m in marks), default=None)

    if first_start is not None:
        steps = [_step("queued", "done", (first_start - created).total_seconds())]
    elif status == Status.QUEUED.value:
        steps = [_step("queued", "waiting", (now - created).total_seconds(), since=created)]
    else:  # a first stage that runs now, or a row from before the marks: the wait is unknown
        steps = [_step("queued", "done", None)]
    for spec in STAGES:
        mine = [m for m in marks if m.get("stage") == spec.name]
        ran = sum((m["finished_at"] - m["started_at"]).total_seconds() for m in mine) if mine else None
        if spec.name == current:
            since = last_end or created
            state = "running" if row.get("lease_owner") is not None else "waiting"
            seconds = (now - since).total_seconds()
            steps.append(_step(spec.name, state, seconds, since=since, passes=len(mine)))
        elif spec.name == failed_at:
            steps.append(_step(spec.name, "failed", ran, passes=len(mine)))
        elif mine:
            steps.append(_step(spec.name, "done", ran, passes=len(mine)))
        elif status == Status.DONE.value and not marks:  # stored before the marks: ran, times unknown
            steps.append(_step(spec.name, "done", None))
        else:
            steps.append(_step(spec.name, "pending", None))
    end = _when(row.get("finished_at"))
    total = (end - created).total_seconds() if finished and end is not None else None
    steps.append(_step("done", status if finished else "pending", total))
    return {
        "pass": int(row.get("iteration") or 0) + 1,
        "passes": int(row.get("max_iterations") or 1),
        "finished": finished,
        "steps": steps,
    }


def _step(
    name: str, state: str, seconds: float | None, *, since: datetime | None = None, passes: int = 0
) -> dict[str, Any]:
    return {
        "name": name,
        "state": state,
        "seconds": round(seconds, 3) if seconds is not None else None,
        "elapsed": duration_text(seconds),
        "since": since.isoformat() if since is not None else None,
        "passes": passes,
    }


def timeline(tool_calls: list[dict[str, Any]], llm_calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tool-call and LLM-call attempt rows as one list by time: each a dict with ``key`` (the
    attempt row's id: what a polling page compares to add only new rows), ``kind``
    (``tool``/``llm``), ``id`` (the tool call's or LLM call's id), ``anchor`` (set on the first
    attempt row of a tool call: the target of the report's citations), ``at``, ``stage``,
    ``name``, ``status``, ``attempt``, ``latency_ms`` (milliseconds), ``tokens`` (prompt +
    completion; ``None`` for a tool or unknown), ``cost_usd``, ``summary`` and ``error``. The
    rows may be whole ``tool_calls``/``llm_calls`` rows or ``db.repo.call_log``'s."""
    events: list[dict[str, Any]] = []
    anchored: set[str] = set()
    for row in tool_calls:
        first = row["tool_call_id"] not in anchored
        anchored.add(row["tool_call_id"])
        events.append(
            {
                "key": row.get("id") or f"{row['tool_call_id']}#{row['attempt']}",
                "kind": "tool",
                "id": row["tool_call_id"],
                "anchor": f"call-{row['tool_call_id']}" if first else None,
                "at": _when(row["timestamp"]),
                "stage": row["stage"],
                "name": row["tool"],
                "status": row["status"],
                "attempt": row["attempt"],
                "latency_ms": row["latency_ms"],
                "tokens": None,
                "cost_usd": None,
                "summary": row["result_summary"],
                "error": " ".join(x for x in (row.get("error_code"), row.get("error")) if x) or None,
            }
        )
    for row in llm_calls:
        prompt, completion = row.get("prompt_tokens"), row.get("completion_tokens")
        tokens = None if prompt is None and completion is None else (prompt or 0) + (completion or 0)
        events.append(
            {
                "key": row.get("id") or f"{row['llm_call_id']}#{row['attempt']}",
                "kind": "llm",
                "id": row["llm_call_id"],
                "anchor": None,
                "at": _when(row["timestamp"]),
                "stage": row["stage"],
                "name": f"{row['agent']} · {row['model']}",
                "status": row["status"],
                "attempt": row["attempt"],
                "latency_ms": row["latency_ms"],
                "tokens": tokens,
                "cost_usd": row.get("cost_usd"),
                "summary": row.get("finish_reason") or "",
                "error": row.get("error"),
            }
        )
    events.sort(key=lambda e: (e["at"] or datetime.min, e["kind"], e["attempt"]))
    return events


def event_json(event: dict[str, Any]) -> dict[str, Any]:
    """A timeline row of :func:`timeline` as JSON for the polling page: ``at`` as UTC ISO 8601
    and ``time`` as the page prints it (``HH:MM:SS.mmm``), the summary cut at 160 characters as
    the page cuts it."""
    at = event["at"]
    summary = str(event["summary"] or "")
    return {
        **event,
        "at": at.isoformat() if at else None,
        "time": at.strftime("%H:%M:%S.%f")[:-3] if at else "",
        "summary": summary if len(summary) <= 160 else summary[:157] + "...",
        "latency": f"{event['latency_ms']:.1f}" if event["latency_ms"] is not None else "",
    }
