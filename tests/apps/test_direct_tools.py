"""`finagent tool`: one tool outside an analysis, its envelope on stdout and its row stored."""

from __future__ import annotations

import json
from pathlib import Path

from sqlalchemy import create_engine, text

from tests.integration.conftest import Service, _base_env


def test_tool_command_prints_the_envelope_and_stores_the_row(tmp_path: Path) -> None:
    cli = Service(env=_base_env(tmp_path), tmp=tmp_path)  # embedded: SQLite in tmp_path/state
    ok = cli.cli("tool", "get_stock_data", '{"symbol": "msft"}', "--as-of", "2010-06-30")
    assert ok.returncode == 0, ok.stderr
    envelope = json.loads(ok.stdout)
    assert envelope["data"]["symbol"] == "MSFT"
    assert envelope["data"]["date"] == "2010-06-30"
    assert envelope["source_refs"] == [envelope["tool_call_id"]]

    refused = cli.cli("tool", "calculator", '{"expression": "__import__(\'os\')"}')
    assert refused.returncode == 1
    assert json.loads(refused.stdout)["error"]["code"] == "INVALID_INPUT"

    engine = create_engine(f"sqlite:///{tmp_path / 'state' / 'finagent.sqlite3'}")
    with engine.connect() as conn:
        rows = conn.execute(
            text("SELECT tool, status, analysis_id, stage FROM tool_calls ORDER BY timestamp")
        ).all()
    engine.dispose()
    assert [tuple(r) for r in rows] == [
        ("get_stock_data", "success", None, "direct"),
        ("calculator", "error", None, "direct"),
    ]


def test_tool_command_usage_errors_and_list(tmp_path: Path) -> None:
    cli = Service(env=_base_env(tmp_path), tmp=tmp_path)
    unknown = cli.cli("tool", "rm_rf", "{}")
    assert unknown.returncode == 2
    assert "unknown tool 'rm_rf'" in unknown.stderr
    bad_json = cli.cli("tool", "calculator", "not json")
    assert bad_json.returncode == 2
    assert "not valid JSON" in bad_json.stderr
    listed = json.loads(cli.cli("tool", "--list", "--json").stdout)
    names = {t["name"] for t in listed}
    assert {"get_stock_data", "get_history", "calculator", "technical_indicators"} <= names
    assert all(t["input_schema"]["type"] == "object" for t in listed)
    assert all(t["summary"] and "\n" not in t["summary"] for t in listed)
    # readable: one line per tool, its name and summary, no schema
    lines = cli.cli("tool", "--list").stdout.splitlines()
    assert len(lines) == len(listed) and "input_schema" not in "\n".join(lines)
    for line, tool in zip(lines, listed, strict=True):
        assert line.split()[0] == tool["name"] and tool["summary"] in line
    assert cli.cli("tool", "calculator", "--json").returncode == 2  # --json goes with --list


def test_chart_command_renders_the_analysis_chart(tmp_path: Path) -> None:
    cli = Service(env=_base_env(tmp_path), tmp=tmp_path)
    out = json.loads(cli.cli("analyze", "IBM", "--as-of", "2012-06-29", "--json").stdout)
    report = cli.cli("show", out["analysis_id"]).stdout
    assert f"finagent chart {out['analysis_id']}" in report  # the report links the chart
    proc = cli.cli("chart", out["analysis_id"])
    assert proc.returncode == 0, proc.stderr
    png = Path(proc.stdout.strip())
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert png.stat().st_size > 10_000
    engine = create_engine(f"sqlite:///{tmp_path / 'state' / 'finagent.sqlite3'}")
    with engine.connect() as conn:
        stages = conn.execute(
            text("SELECT stage, status FROM tool_calls WHERE tool = 'render_chart' AND analysis_id = :a"),
            {"a": out["analysis_id"]},
        ).all()
    engine.dispose()
    assert [tuple(r) for r in stages] == [("chart", "success")]
    assert cli.cli("chart", "no-such-analysis").returncode == 2
