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


def test_spy_with_a_chain_but_no_history_through_a_worker_is_a_cited_chart_rejection(
    service: Service, start_worker, stocknet_dir: Path
) -> None:
    # the CBOE SPY chain of 2025-05-16 exists; the stocknet folder has no SPY.csv (seed 004:
    # no price history to measure HV and support → the chart analyst rejects with NO_DATA)
    service.env.update(
        {
            "FINAGENT_DATA_PROVIDER": "csv",
            "FINAGENT_DATA_DIR": str(stocknet_dir),
            "FINAGENT_OPTIONS_DIR": str(SHARED_DATA / "options"),
        }
    )
    start_worker()
    report = service.analyze_json("SPY", "--type", "csp", "--as-of", "2025-05-16")
    assert report["status"] == "done"
    csp = report["csp"]
    assert (csp["status"], csp["rejected_by"]) == ("rejected", "chart")
    (reason,) = csp["reasons"]
    assert reason["text"].startswith("NO_DATA: no price history") and "SPY" in reason["text"]
    (ref,) = reason["source_refs"]
    engine = create_engine(service.env["FINAGENT_DATABASE_URL"])
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                text("SELECT tool, tool_call_id, status FROM tool_calls WHERE analysis_id = :id"),
                {"id": report["analysis_id"]},
            ).all()
    finally:
        engine.dispose()
    # one call, the failed quote the rejection cites; no chain or later data was read
    assert [tuple(r) for r in rows] == [("get_stock_data", ref, "error")]
