"""The console's settings page (``/console/settings``): what this deployment uses and whether it
reaches it (``apps.doctor.diagnose``, what ``finagent doctor`` prints): the data sources,
option chains, live quotes, LLM deployments, broker, database and the span of the data; and the
data span the new-analysis form suggests tickers and dates from
(``apps.api.console.data_span.suggested_span``).

Every signed-in key (``read``) sees the statuses and what each source is; where a thing lives
(a folder, a host, a database URL with its password hidden) is the deployment's layout, shown
to keys with the ``operator`` scope only: other keys see the status and the reason without the
locations. Reference: ``docs/console.md``, "Settings".
"""

from __future__ import annotations

import re
import time
from typing import Any, Final

from fastapi import Request
from fastapi.responses import HTMLResponse

from apps.api.console.views import SignedIn, _page, router
from apps.api.deps import app_settings

#: Seconds each reachability check of the settings page may take.
CHECK_TIMEOUT_S: Final = 3.0
_PATH_RE: Final = re.compile(r"(?<![\w.:/])/[^\s,;)\]]+")


def shown_check(check: Any, *, operator: bool) -> dict[str, Any]:
    """A doctor ``Check`` as the page shows it: every field for an ``operator`` key; for the
    others no ``target`` and absolute paths in the detail replaced by ``…`` (the services'
    details, which name hosts and errors, by their status alone)."""
    row = {
        "area": check.area,
        "name": check.name,
        "source": check.source,
        "target": check.target,
        "status": check.status,
        "detail": check.detail,
        "seconds": check.seconds,
    }
    if operator:
        return row
    detail = _PATH_RE.sub("…", check.detail)
    if check.target:
        detail = detail.replace(check.target, "…")
    if check.area == "services" and check.status in ("unreachable", "misconfigured"):
        detail = f"{check.status}: the operator's settings and logs say why"
    return {**row, "target": None, "detail": detail}


@router.get("/settings")
def settings_page(request: Request, auth: SignedIn) -> HTMLResponse:
    """What the deployment uses and reaches (module docstring); the checks run on each visit,
    in parallel, each bounded by :data:`CHECK_TIMEOUT_S` seconds."""
    from apps.doctor import diagnose  # lazy: the providers and the LLM config

    principal, session = auth
    settings = app_settings(request)
    started = time.monotonic()
    diagnosis = diagnose(settings=settings, timeout=CHECK_TIMEOUT_S)
    took = time.monotonic() - started
    operator = "operator" in principal.scopes
    rows = [shown_check(c, operator=operator) for c in diagnosis.checks]
    areas = [
        (area, title, [r for r in rows if r["area"] == area])
        for area, title in (("data", "Data"), ("llm", "Language models"), ("services", "Services"))
    ]
    return _page(
        request, "settings.html", principal=principal, session=session, diagnosis=diagnosis,
        areas=areas, took=took, operator=operator, span=diagnosis.data, notes=list(diagnosis.notes),
    )  # fmt: skip
