"""The chart of an analysis as the gateway serves it (``GET /analyses/{id}/chart.png``): when it
can be drawn, its ETag, and one render by the ``render_chart`` tool under the app's
:class:`ChartGate` (a bounded number of requests, one render at a time).

Caching follows RFC 9110 (§8.8.3 ETag, §13.1.2 If-None-Match, weak comparison).
"""

from __future__ import annotations

import hashlib
import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from apps.analysis_chart import render_analysis_chart
from core.settings import Settings
from core.stages import TERMINAL_STATUSES
from pipeline.stages.research import chartable_history

logger = logging.getLogger("finagent.api")

PNG_MAGIC: Final = b"\x89PNG\r\n\x1a\n"
#: Bump when the chart's look changes (render arguments, style): it invalidates cached ETags.
CHART_VERSION: Final = "1"
#: A finished analysis's chart never changes; clients revalidate with ``If-None-Match`` after a day.
CHART_CACHE_CONTROL: Final = "private, max-age=86400"
#: Chart requests allowed in the thread pool at once (renders are serialised by a lock); more → 503.
MAX_CHART_REQUESTS: Final = 4


class ChartRenderError(Exception):
    """The chart could not be produced; ``status_code`` is the HTTP answer (500 tool failure,
    503 transient: retry)."""

    def __init__(self, message: str, *, status_code: int) -> None:
        """``message``: the response's ``detail``; ``status_code``: 500 or 503."""
        super().__init__(message)
        self.status_code = status_code


@dataclass
class ChartGate:
    """One app's chart admission: ``slots`` bounds the chart requests in progress
    (:data:`MAX_CHART_REQUESTS`; the route answers 503 beyond it), ``lock`` serialises renders:
    ``render_chart`` writes ``<state_dir>/charts/<analysis_id>.png``, and rendering and reading
    under one lock keeps a concurrent request for the same analysis from truncating the file
    being read."""

    slots: threading.BoundedSemaphore = field(
        default_factory=lambda: threading.BoundedSemaphore(MAX_CHART_REQUESTS)
    )
    lock: threading.Lock = field(default_factory=threading.Lock)


def chart_unavailable_reason(row: dict[str, Any]) -> str | None:
    """Why the chart of analysis ``row`` (a full ``analyses`` row, ``state`` parsed) cannot be
    drawn, or ``None`` when it can: the analysis must be finished (``done`` or ``failed``) and
    its research must have a successful ``get_history`` call (``stock_data.history_ref``)."""
    if row["status"] not in TERMINAL_STATUSES:
        return f"analysis {row['id']} is not finished (status {row['status']}); retry when it is done"
    if chartable_history(row) is None:
        return f"analysis {row['id']} has no price history to chart (status {row['status']}, research failed)"
    return None


def chart_etag(row: dict[str, Any]) -> str:
    """A weak ETag for the chart of a finished analysis ``row``: a digest of its id, finish
    time, cited history call and :data:`CHART_VERSION` (the PNG bytes are not hashed: the
    drawing is deterministic given these, and the check must not need a render)."""
    finished = row.get("finished_at") or row.get("updated_at")
    key = f"{row['id']}|{finished}|{chartable_history(row)}|{CHART_VERSION}"
    return f'W/"{hashlib.sha256(key.encode()).hexdigest()[:24]}"'


def etag_matches(if_none_match: str | None, etag: str) -> bool:
    """Weak comparison (RFC 9110 §13.1.2) of ``etag`` with an ``If-None-Match`` header value
    (a comma-separated list of entity tags, or ``*``)."""
    if not if_none_match:
        return False

    def opaque(tag: str) -> str:
        tag = tag.strip()
        return tag[2:] if tag.startswith("W/") else tag

    return any(t.strip() == "*" or opaque(t) == opaque(etag) for t in if_none_match.split(","))


def render_chart_png(*, analysis_id: str, gate: ChartGate, settings: Settings) -> tuple[bytes, str]:
    """``(PNG bytes, tool_call_id)`` of one ``render_analysis_chart`` call, rendered and read
    under ``gate.lock``.

    Raises ``KeyError`` as ``render_analysis_chart`` does; ``ChartRenderError`` (500) when
    the tool answered with an error, (503) when the file is not a whole PNG (another process,
    e.g. ``finagent chart``, rewrote it while it was read)."""
    with gate.lock:
        envelope = render_analysis_chart(analysis_id=analysis_id, settings=settings)
        if envelope.error is not None or not envelope.data:
            code = envelope.error.code.value if envelope.error else "NO_DATA"
            message = envelope.error.message if envelope.error else "no output"
            logger.warning("chart of %s failed: %s: %s", analysis_id, code, message)
            raise ChartRenderError(f"chart rendering failed: {code}: {message}", status_code=500)
        png = Path(envelope.data["path"]).read_bytes()
    if not png.startswith(PNG_MAGIC) or len(png) != envelope.data["bytes"]:
        raise ChartRenderError("the chart file changed while it was read; retry", status_code=503)
    return png, envelope.tool_call_id
