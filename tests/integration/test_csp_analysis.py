"""A cash-secured put analysis (seed 004) through a real worker: csv provider on the stocknet
bars, the Lean GOOG chain of 2015-12-24, Redis broker, PostgreSQL."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import create_engine, text

from tests.conftest import SHARED_DATA
from tests.integration.conftest import Service


def test_goog_csp_through_a_worker_ends_in_a_cited_rejection(
    service: Service, start_worker, stocknet_dir: Path
) -> None:
    options = SHARED_DATA / "options"
    extra = {
        "FINAGENT_DATA_PROVIDER": "csv",
        "FINAGENT_DATA_DIR": str(stocknet_dir),
        "FINAGENT_OPTIONS_DIR": str(options),
    }
    service.env.update(extra)
    start_worker()
    report = service.analyze_json("GOOG", "--type", "csp", "--as-of", "2015-12-24")
    assert report["status"] == "done"
    csp = report["csp"]
    assert csp["status"] == "rejected" and csp["rejected_by"] == "options"
    reason = csp["reasons"][0]
    assert "below HV(20)" in reason["text"]
    ref = reason["source_refs"][0]
    assert ref.startswith("calculate_iv_hv_") and ref in report["source_refs"]
    engine = create_engine(service.env["FINAGENT_DATABASE_URL"])
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                text("SELECT tool, stage, status FROM tool_calls WHERE tool_call_id = :id"), {"id": ref}
            ).all()
    finally:
        engine.dispose()
    assert [tuple(r) for r in rows] == [("calculate_iv_hv", "analysis", "success")]
    proc = service.cli("show", report["analysis_id"])
    assert proc.returncode == 0 and "## Cash-secured put" in proc.stdout
    assert "Rejected by the options analyst." in proc.stdout
