"""Structured-output negotiation per deployment against local OpenAI-compatible servers over
real HTTP: a server answering like llama-cpp-python (HTTP 500 "only 'text' or 'json_object'
allowed" to a ``json_schema`` response_format, llama.cpp's ``{"type": "json_object", "schema"}``
accepted), one refusing every schema form, one refusing any response_format."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from agents.llm import forms
from agents.llm.config import LLMConfig, Role
from agents.llm.runner import run_sync
from agents.llm.session import LLMSession
from tests.llm.responders import AgentPlayer
from tests.llm.server import Reply, ScriptedLLM, chat, error
from tests.llm.test_pipeline_llm import _json, _llm_rows, _run, _show

MESSAGES = [{"role": "user", "content": "hello"}]
#: llama-cpp-python's server (llama_cpp/llama_chat_format.py) refuses any response_format type
#: but text and json_object with this text, wrapped as an HTTP 500 by its error handler.
LLAMA_CPP_PYTHON_REFUSAL = "Invalid response_format type, only 'text' or 'json_object' allowed"


class _Answer(BaseModel):
    ticker: str
    score: int


@dataclass
class LlamaCppPython:
    """Responder of a llama-cpp-python server in front of ``inner`` (another responder, or a
    fixed valid answer): ``json_schema`` → 500 with llama-cpp-python's refusal; anything else →
    ``inner``. ``forms`` lists the form of every request (``json_schema``,
    ``json_object_schema``, ``json_object``, ``prompt``)."""

    inner: Any = None
    forms: list[str] = field(default_factory=list)

    def __call__(self, body: dict[str, Any]) -> Reply:
        fmt = body.get("response_format")
        form = "prompt" if not fmt else fmt["type"] + ("_schema" if "schema" in fmt else "")
        self.forms.append(form)
        if form == "json_schema":
            return error(500, LLAMA_CPP_PYTHON_REFUSAL)
        if self.inner is None:
            return chat('{"ticker": "A", "score": 1}')
        reply: Reply = self.inner(body)
        return reply


@pytest.fixture(autouse=True)
def _fresh_negotiation() -> None:
    # each test starts as a new process would: nothing negotiated yet
    forms.forget_forms()


def _session(server: ScriptedLLM, name: str, **overrides: Any) -> LLMSession:
    fields: dict[str, Any] = {
        "models": {Role.TECHNICAL: f"openai/{name}"},
        "api_base": server.url,
        "num_retries": 2,
        "retry_backoff": 5.0,  # a retry would show as a sleep of 5 s
        "allowed_fails": 0,  # the first counted failure would cool the deployment down
        "cooldown_time": 60.0,
        **overrides,
    }
    config = LLMConfig(**fields)
    return LLMSession(config=config, analysis_id="a-forms", stage="analysis", sleep=_no_sleep)


SLEPT: list[float] = []


async def _no_sleep(seconds: float) -> None:
    SLEPT.append(seconds)


def _ask(session: LLMSession) -> Any:
    return run_sync(
        session.complete(agent="technical", role=Role.TECHNICAL, messages=MESSAGES, response_schema=_Answer)
    )


def test_a_llama_cpp_python_500_on_json_schema_steps_down_once_without_retry_or_cooldown(
    llm_server: ScriptedLLM,
) -> None:
    server = LlamaCppPython()
    llm_server.responder = server
    SLEPT.clear()
    session = _session(llm_server, "llama-cpp-python")

    first = _ask(session)
    second = _ask(session)  # the same process: the refused form is not sent again

    assert server.forms == ["json_schema", "json_object_schema", "json_object_schema"]
    schema_sent = llm_server.requests[1]["response_format"]
    assert schema_sent["schema"]["required"] == ["ticker", "score"]  # llama.cpp's grammar input
    assert SLEPT == []  # no backoff: a refusal is not a transient failure
    # allowed_fails=0: had the Router counted the 500, the deployment would be cooling down and
    # the second call would never have reached the server
    assert len(llm_server.requests) == 3
    assert [(r["status"], r["level"]) for r in session.rows] == [
        ("error", "WARNING"),
        ("success", "INFO"),
        ("success", "INFO"),
    ]
    assert "only 'text' or 'json_object' allowed" in session.rows[0]["error"]
    assert [r["request"]["response_format"] for r in session.rows] == [
        "json_schema",
        "json_object_schema",
        "json_object_schema",
    ]
    assert first.response_format == second.response_format == "json_object_schema"
    assert forms.negotiated_forms() == {"openai/llama-cpp-python": "json_object_schema"}


def test_each_refused_form_steps_down_to_the_next_and_prompt_only_is_the_floor(
    llm_server: ScriptedLLM,
) -> None:
    def no_formats(body: dict[str, Any]) -> Reply:
        if body.get("response_format"):
            return error(400, f"unsupported response_format {json.dumps(body['response_format'])[:40]}")
        return chat('{"ticker": "B", "score": 2}')

    llm_server.responder = no_formats
    session = _session(llm_server, "no-formats")

    answer = _ask(session)

    sent = [r.get("response_format") for r in llm_server.requests]
    assert [None if f is None else (f["type"], "schema" in f or "json_schema" in f) for f in sent] == [
        ("json_schema", True),
        ("json_object", True),
        ("json_object", False),
        None,
    ]
    assert answer.content == '{"ticker": "B", "score": 2}' and answer.response_format == "prompt"
    assert [r["status"] for r in session.rows] == ["error", "error", "error", "success"]


def test_an_error_that_does_not_name_the_format_is_a_failure_not_a_refusal(llm_server: ScriptedLLM) -> None:
    llm_server.script("flaky", [error(500, "CUDA out of memory"), chat('{"ticker": "C", "score": 3}')])
    SLEPT.clear()
    session = _session(llm_server, "flaky", allowed_fails=5)

    answer = _ask(session)

    # retried after the backoff with the same (schema) form: a transient 5xx
    assert [r["response_format"]["type"] for r in llm_server.requests] == ["json_schema", "json_schema"]
    assert SLEPT == [5.0] and answer.response_format == "json_schema"


def test_the_analysis_gets_accepted_answers_from_a_llama_cpp_python_server(
    tmp_path: Path, llm_server: ScriptedLLM
) -> None:
    server = LlamaCppPython(inner=AgentPlayer())
    llm_server.responder = server

    out = _json(_run(tmp_path, llm_server, "AAPL", "--as-of", "2012-06-29", "--json"))

    assert out["status"] == "done" and out["author"] == {"kind": "llm", "model": "openai/scripted"}
    for name in ("technical", "fundamental", "synthesis"):
        assert out["analysts"][name]["source"] == "llm", out["analysts"][name]
        assert out["analysts"][name]["fallback"] is False
    # the technical (tool call, then its answer) and the fundamental analyst answer in calls that
    # offer tools, which ask for no JSON form; the synthesis is the first JSON answer: refused
    # as json_schema, answered as llama.cpp's json_object + schema
    assert server.forms == ["prompt", "prompt", "prompt", "json_schema", "json_object_schema"]
    assert out["analysts"]["technical"]["response_format"] is None
    assert out["analysts"]["synthesis"]["response_format"] == "json_object_schema"
    rows = _llm_rows(tmp_path, out["analysis_id"])
    refused = [r for r in rows if r["status"] == "error"]
    assert len(refused) == 1 and "json_object" in refused[0]["error"]
    report = _show(tmp_path, out["analysis_id"])
    assert "(LLM `openai/scripted`, response format json_object_schema)" in report


def test_the_temperature_setting_is_sent_on_every_call_and_defaults_to_zero(llm_server: ScriptedLLM) -> None:
    from agents.llm.config import llm_config
    from core.settings import Settings

    llm_server.responder = lambda body: chat('{"ticker": "D", "score": 4}')
    default = llm_config(
        settings=Settings(_env_file=None, llm_model="openai/t0", llm_api_base=llm_server.url)
    )
    warm = llm_config(
        settings=Settings(
            _env_file=None, llm_model="openai/t7", llm_api_base=llm_server.url, llm_temperature=0.7
        )
    )
    assert default is not None and warm is not None
    for config in (default, warm):
        session = LLMSession(config=config, analysis_id="a-temp", stage="analysis")
        _ask(session)  # a JSON answer
        run_sync(session.complete(agent="technical", role=Role.TECHNICAL, messages=MESSAGES))  # plain text
    assert [(b["model"], b["temperature"]) for b in llm_server.requests] == [
        ("t0", 0),
        ("t0", 0),
        ("t7", 0.7),
        ("t7", 0.7),
    ]


def test_the_report_names_the_deployment_that_answered_and_says_it_was_a_fallback(
    tmp_path: Path, llm_server: ScriptedLLM
) -> None:
    player = AgentPlayer()

    def primary_refused(body: dict[str, Any]) -> Reply:
        if body.get("model") == "scripted":
            return error(401, "bad key")  # not retried: the fallback at once
        reply: Reply = player(body)
        return reply

    llm_server.responder = primary_refused

    out = _json(
        _run(
            tmp_path,
            llm_server,
            "AAPL",
            "--as-of",
            "2012-06-29",
            "--json",
            FINAGENT_LLM_FALLBACKS="openai/backup",
            FINAGENT_LLM_TIMEOUT="7",  # two models must fit the stage budget: 2 x 2 x (3 x 7 + 3) = 96 s
        )
    )

    assert out["analysts"]["synthesis"]["model"] == "openai/backup"
    assert out["analysts"]["synthesis"]["fallback"] is True
    report = _show(tmp_path, out["analysis_id"])
    assert "(LLM `openai/backup`, a fallback, response format json_schema)" in report
