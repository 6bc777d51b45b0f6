"""``bench/llm_local_model.py`` against the scripted server answering like llama-cpp-python
(HTTP 500 on a ``json_schema`` response_format): whole analyses run, each role counted."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

from agents.analysts.prompts import FIELD_HINTS
from tests.llm.responders import AgentPlayer, HintEcho
from tests.llm.server import ScriptedLLM
from tests.llm.test_response_forms import LlamaCppPython

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "bench" / "llm_local_model.py"


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("llm_local_model", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their module's annotations through it
    spec.loader.exec_module(module)
    return module


def test_the_bench_runs_an_analysis_against_a_llama_cpp_python_like_server(llm_server: ScriptedLLM) -> None:
    server = LlamaCppPython(inner=AgentPlayer())
    llm_server.responder = server
    env = {k: v for k, v in os.environ.items() if not k.startswith("FINAGENT_")}
    proc = subprocess.run(
        [
            sys.executable,
            str(BENCH),
            llm_server.url,
            "--model",
            "openai/scripted",
            "--analyses",
            "1",
            "--json",
        ],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    (row,) = out["analyses"]
    assert (row["symbol"], row["as_of"], row["dataset"]) == ("AAPL", "2012-06-29", "embedded")
    # the scripted analysts answer valid JSON at once; no news folder on the embedded data
    assert row["roles"] == {
        "technical": "accepted",
        "fundamental": "accepted",
        "sentiment": "skipped",
        "synthesis": "accepted",
    }
    # the server saw the refused json_schema form once, then llama.cpp's json_object + schema
    assert "json_schema" in server.forms and "json_object_schema" in server.forms
    assert row["tokens"] > 0 and row["llm_calls"] >= 4 and row["error"] is None
    assert row["baseline_wall_s"] > 0 and out["summary"]["ratio"] > 0  # the no-model run, same case
    roles = out["summary"]["roles"]
    assert roles["technical"]["accepted_pct"] == 100.0 and roles["sentiment"]["accepted_pct"] is None
    # the scripted analysts write their own notes; no example was shown, so none is compared
    assert roles["technical"]["copies"]["answers"] == 1 and roles["technical"]["copies"]["with_example"] == 0
    assert row["answers"]["technical"]["text"].startswith("RSI(14) is ")
    assert row["answers"]["technical"]["refused"] is None


def _run_bench(url: str, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FINAGENT_")}
    env["FINAGENT_LLM_PROFILE"] = "local-cpu"
    return subprocess.run(
        [sys.executable, str(BENCH), url, "--model", "openai/qwen-0.5b", "--json", *extra],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_a_model_that_writes_the_keys_descriptions_back_is_counted_as_no_reading(
    llm_server: ScriptedLLM,
) -> None:
    llm_server.responder = LlamaCppPython(inner=HintEcho())
    proc = _run_bench(llm_server.url, "--analyses", "1")
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    (row,) = out["analyses"]
    roles = out["summary"]["roles"]
    for role in ("technical", "fundamental", "synthesis"):
        # valid, grounded JSON whose prose is the prompt's description of notes: refused, the
        # deterministic result stands; the model's answer and judgement are still read
        assert roles[role]["accepted"] == 0 and roles[role]["dropped"] == 1, roles[role]
        assert roles[role]["codes"] == {"LLM_NO_READING": 1}, roles[role]
        answer = row["answers"][role]
        assert answer["refused"] == "LLM_NO_READING" and answer["text"] == FIELD_HINTS["notes"]
        assert roles[role]["copies"]["refused"] == {"LLM_NO_READING": 1}
        assert answer["example_label"] is None and roles[role]["copies"]["with_example"] == 0
    assert row["answers"]["synthesis"]["label"] == "HOLD"
    # the deterministic readings of the same analysis come from the no-model run
    assert row["deterministic"]["technical"] in ("bullish", "neutral", "bearish")
    assert row["deterministic"]["synthesis"] in ("BUY", "HOLD", "SELL")


def test_the_dry_run_resolves_the_local_cpu_settings_without_a_model_call(llm_server: ScriptedLLM) -> None:
    proc = _run_bench("http://127.0.0.1:18777/v1", "--dry-run")
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    assert out["settings"]["profile"] == "local-cpu" and out["settings"]["max_iterations"] == 0
    assert out["settings"]["model"] == "openai/qwen-0.5b"
    assert out["settings"]["api_base"] == "http://127.0.0.1:18777/v1"
    assert len(out["cases"]) == 6 and llm_server.requests == []


def test_copies_tell_a_copy_from_a_reading_and_from_agreement_with_the_rules() -> None:
    bench = _bench()
    example = {"recommendation": "bearish", "notes": "Close 10 is above the SMA 9."}

    def result(label: str, notes: str) -> object:
        report = {
            "symbol": "X",
            "as_of": "2020-01-02",
            "analysts": {
                "technical": {
                    "source": "llm",
                    "result": {"recommendation": label, "notes": notes},
                    "example": example,
                }
            },
        }
        r = bench.classify(report, [])
        r.deterministic = {"technical": "bullish"}
        return r

    copied = result("bearish", "close 10 is above the  SMA 9.")  # case and spacing differ only
    near = result("bearish", "Close 10 is above the SMA 9!")
    reading = result("bullish", "The trend is up: close 10 is above the two-hundred-day SMA 9.")
    counts = bench.copies([copied, near, reading], "technical")
    assert (counts["answers"], counts["signal_as_example"], counts["agrees_with_deterministic"]) == (3, 2, 1)
    assert (counts["prose_identical"], counts["prose_near"]) == (1, 1)
    # example (bearish) and rules (bullish) differ on all three: two follow the example, one the rules
    assert (counts["example_differs"], counts["example_differs_as_example"]) == (3, 2)
    assert counts["example_differs_as_deterministic"] == 1


def test_classify_counts_repairs_drops_signal_rejections_and_grounding_drops() -> None:
    bench = _bench()
    report = {
        "symbol": "MSFT",
        "as_of": "2010-06-30",
        "signal": "HOLD",
        "raw_signal": "SELL",
        "tokens": {"total": 900, "prompt": 800, "completion": 100},
        "analysts": {
            "technical": {"source": "llm"},
            "fundamental": {"source": "deterministic", "error": "LLM_INVALID_OUTPUT: fundamental: ..."},
            "sentiment": {"source": "skipped"},
            "synthesis": {"source": "rejected"},
        },
        "grounding": {
            "dropped": [
                {"part": "synthesis.rationale", "text": "x", "numbers": ["1"]},
                {"part": "synthesis.risks", "text": "y", "numbers": ["2"]},
                {
                    "part": "technical.trend_direction",
                    "text": "down",
                    "numbers": ["trend_direction down (the close 23.01 ...); the data's up is used"],
                },
            ]
        },
    }
    calls = [
        {"agent": "technical", "status": "success"},
        {"agent": "technical.repair", "status": "success"},
        {"agent": "fundamental", "status": "success"},
        {"agent": "fundamental.repair", "status": "success"},
        {"agent": "synthesis", "status": "success"},
    ]
    result = bench.classify(report, calls)
    assert result.roles == {
        "technical": "repaired",
        "fundamental": "dropped",
        "sentiment": "skipped",
        "synthesis": "accepted+signal_rejected",
    }
    assert result.codes == {"fundamental": "LLM_INVALID_OUTPUT"}
    assert result.grounding_drops == {"synthesis": 2, "technical": 1}
    assert [d["part"] for d in result.dropped] == [
        "synthesis.rationale",
        "synthesis.risks",
        "technical.trend_direction",
    ]
    assert (result.tokens, result.llm_calls, result.signal) == (900, 5, "SELL")
    roles = bench.summary([result])["roles"]
    # technical: 1 repaired of 1 asked; fundamental: 0 of 1; synthesis: 1 of 1 (its signal aside)
    assert [roles[r]["accepted_pct"] for r in ("technical", "fundamental", "synthesis")] == [
        100.0,
        0.0,
        100.0,
    ]
    assert roles["synthesis"]["signal_rejected"] == 1 and roles["sentiment"]["accepted_pct"] is None
    assert roles["technical"]["labels_replaced"] == 1 and roles["synthesis"]["labels_replaced"] == 0
