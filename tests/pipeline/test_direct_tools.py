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
    listed = json.loads(cli.cli("tool", "--list").stdout)
    names = {t["name"] for t in listed}
    assert {"get_stock_data", "get_history", "calculator", "technical_indicators"} <= names
    assert all(t["input_schema"]["type"] == "object" for t in listed)
