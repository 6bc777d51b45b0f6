"""What a console page costs against the JSON route it is built on, served by the same gateway.

    .venv/bin/python bench/console_pages.py [--requests 40]

One process: a fresh embedded state (SQLite) in a temporary folder, one finished analysis of
AAPL as of 2012-06-29 (the in-process worker), a key, the gateway under uvicorn on a free port,
a signed-in console session. Then, alternating so load drifts hit both alike, ``--requests``
times each of:

- ``GET /analyses/{id}`` (JSON, the report included): the baseline of the detail page;
- ``GET /console/analyses/{id}`` (HTML: the same row, its tool and LLM calls, the timeline, the
  Markdown report rendered);
- ``GET /analyses`` (JSON list): the baseline of the list page;
- ``GET /console/analyses`` (HTML list);
- ``GET /console/analyses/{id}/live.json`` (what a watching tab polls every 1.5 s: the
  stepper and the timeline rows), against the JSON detail;
- ``GET /console/analyses/{id}/chart.json`` (the interactive chart's bars and layers, computed
  on each request without ``If-None-Match``), against the JSON detail.

Stdout: the median and p95 milliseconds of each and the ratio of each page to its baseline
(medians); the last line is ``detail_ratio=X.XX list_ratio=Y.YY live_ratio=Z.ZZ
chart_json_ratio=W.WW``. The PNG chart is not fetched (its render is measured by
``bench/chart_first_render.py``).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def main() -> None:
    """Run the measurement described in the module docstring and print it."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=40)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["FINAGENT_SERVICE_STATE_DIR"] = tmp
        for key in [k for k in os.environ if k.startswith("FINAGENT_") and k != "FINAGENT_SERVICE_STATE_DIR"]:
            del os.environ[key]
        import httpx

        from apps.api.auth import create_key
        from core.settings import get_settings
        from pipeline.producer import stop_embedded_worker
        from tasks import enqueue_analysis
        from tests.apps.api.conftest import serve_app

        settings = get_settings()
        row = enqueue_analysis("AAPL", as_of=date(2012, 6, 29), settings=get_settings()).wait(timeout=300)
        assert row["status"] == "done", row["status"]
        analysis_id = row["id"]
        key = create_key(name="bench", settings=settings)
        try:
            with (
                serve_app(settings) as base,
                # a browser sends its page's Origin with a form's POST; the console checks it
                httpx.Client(base_url=base, timeout=60, headers={"Origin": base}) as client,
            ):
                token = re.search(r'name="csrf" value="([^"]+)"', client.get("/console/login").text)
                assert token
                signed_in = client.post("/console/login", data={"api_key": key, "csrf": token.group(1)})
                assert signed_in.status_code == 303
                headers = {"X-API-Key": key}
                targets = {
                    "json detail": (f"/analyses/{analysis_id}", headers),
                    "console detail": (f"/console/analyses/{analysis_id}", {}),
                    "json list": ("/analyses", headers),
                    "console list": ("/console/analyses", {}),
                    "console live": (f"/console/analyses/{analysis_id}/live.json", {}),
                    "console chart.json": (f"/console/analyses/{analysis_id}/chart.json", {}),
                }
                times: dict[str, list[float]] = {name: [] for name in targets}
                for name, (path, hdrs) in targets.items():  # warm-up: one of each, not counted
                    assert client.get(path, headers=hdrs).status_code == 200, name
                for _ in range(args.requests):
                    for name, (path, hdrs) in targets.items():
                        start = time.perf_counter()
                        answer = client.get(path, headers=hdrs)
                        times[name].append((time.perf_counter() - start) * 1000)
                        assert answer.status_code == 200, (name, answer.status_code)
        finally:
            stop_embedded_worker()
    medians = {name: statistics.median(values) for name, values in times.items()}
    for name, values in times.items():
        print(f"{name:15s} median {medians[name]:7.1f} ms  p95 {_p95(values):7.1f} ms  (n={len(values)})")
    detail = medians["console detail"] / medians["json detail"]
    listing = medians["console list"] / medians["json list"]
    live = medians["console live"] / medians["json detail"]
    chart = medians["console chart.json"] / medians["json detail"]
    print(f"detail_ratio={detail:.2f} list_ratio={listing:.2f}", end=" ")
    print(f"live_ratio={live:.2f} chart_json_ratio={chart:.2f}")


if __name__ == "__main__":
    main()
