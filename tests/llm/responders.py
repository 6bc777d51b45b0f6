"""A scripted "model" that plays every finagent agent from the request it receives.

It reads the agent from the system prompt and answers with structurally valid JSON that cites
the tool_call_ids and copies numbers found in the prompt, like a well-behaved model. Options
make it misbehave in one way each, for the tests: invent a number in the synthesis, or answer
the technical analyst with malformed JSON.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from agents.analysts.prompts import FIELD_HINTS
from tests.llm.server import Reply, ScriptedLLM, chat, error

INVENTED = "987.65"
_REF_RE = re.compile(r"\b(technical_indicators|get_stock_data|get_history|calculator)_[0-9a-f]{12}\b")
_RSI_RE = re.compile(r'"rsi_14":\s*([0-9.]+)')
#: A tool_call_id in a prompt (tool name, ``_``, hex digits).
_TOOL_CALL_ID_RE = re.compile(r"\b([a-z][a-z_]*_[0-9a-f]{12,})\b")
_NOTES_RSI_RE = re.compile(r"RSI\(14\) is ([0-9.]+[0-9])")


@dataclass
class AgentPlayer:
    """Callable responder for ``ScriptedLLM.responder``; counts the calls per agent."""

    invent_number: bool = False
    malformed_technical: bool = False
    fix_in_correction: bool = True
    tool_call_first: bool = True
    #: the synthesis's signal and, when set, its only rationale statement (citing the indicators)
    synthesis_signal: str = "HOLD"
    #: when set, the synthesis's rationale: one statement each, ``{rsi}`` filled with the RSI
    #: the technical analyst reported
    synthesis_statements: tuple[str, ...] | None = None
    #: prompt tokens the synthesis reply reports (a large value spends the token budget)
    synthesis_prompt_tokens: int = 100
    #: seconds every reply to the technical analyst waits (a slow model), and how many tool
    #: rounds it asks for before answering
    technical_delay: float = 0.0
    tool_rounds: int = 1
    #: the correction round keeps the signal but answers with the scorer's bearish rule texts
    #: copied from the prompt (a "BUY with only bearish statements")
    bearish_correction: bool = False
    #: the technical analyst appends a sentence with the invented number to its notes
    invent_in_technical: bool = False
    #: labels and levels the technical analyst answers instead of its own (kept by the
    #: correction round, which only removes the invented number)
    technical_labels: dict[str, Any] = field(default_factory=dict)
    calls: dict[str, int] = field(default_factory=dict)
    bodies: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def __call__(self, body: dict[str, Any]) -> Reply:
        messages = body.get("messages", [])
        system = str(messages[0].get("content", "")) if messages else ""
        text = "\n".join(str(m.get("content") or "") for m in messages)
        refs = [m.group(0) for m in _REF_RE.finditer(text)]
        agent = self._agent(system, messages)
        self.calls[agent] = self.calls.get(agent, 0) + 1
        self.bodies.setdefault(agent, []).append(body)
        if agent == "query":
            return chat(json.dumps({"ticker": "AAPL", "analysis_type": "composite"}))
        if agent == "technical":
            reply = self._technical(messages, refs, text)
            reply.delay = self.technical_delay
            return reply
        if agent == "repair":
            if self.malformed_technical:
                return chat("still not json")
            return chat(json.dumps(self._technical_view(refs, text)))
        if agent == "fundamental":  # a view with no number: nothing to ground, nothing invented
            fundamentals = [r for r in refs if r.startswith("get_fundamentals")][:1]
            view = {"outlook": "neutral", "missing_data": [], "notes": "Valuation read from the cited data."}
            return chat(json.dumps({**view, "source_refs": fundamentals}))
        if agent == "synthesis":
            answer = "```json\n" + json.dumps(self._synthesis(refs, text)) + "\n```"
            return chat(answer, prompt_tokens=self.synthesis_prompt_tokens)
        if agent == "correction":
            previous = json.loads(str(messages[-2].get("content")))
            if self.bearish_correction and "rationale" in previous:
                rules = json.loads(text.split("Deterministic scorer: ", 1)[1].split("\n", 1)[0])["rules"]
                previous["rationale"] = [
                    {"text": r["text"], "source_refs": r["source_refs"]} for r in rules if r["vote"] < 0
                ]
            elif self.fix_in_correction:
                fixed = json.dumps(previous).replace(f" and a target of {INVENTED}", "")
                previous = json.loads(fixed.replace(f" Price target {INVENTED}.", ""))
            return chat(json.dumps(previous))
        return chat(json.dumps({"notes": "unknown agent"}))

    @staticmethod
    def _agent(system: str, messages: list[dict[str, Any]]) -> str:
        last = str(messages[-1].get("content") or "") if messages else ""
        if last.startswith("Your answer is invalid"):
            return "repair"
        if last.startswith("These numbers match no tool output"):
            return "correction"
        if "technical (chart) analyst" in system:
            return "technical"
        if "synthesis step" in system:
            return "synthesis"
        if "fundamental analyst" in system:
            return "fundamental"
        if last.startswith("These numbers match no tool output"):
            return "correction"
        if "ticker" in system and "analysis_type" in system:
            return "query"
        return "other"

    def _technical(self, messages: list[dict[str, Any]], refs: list[str], text: str) -> Reply:
        tool_results = sum(1 for m in messages if m.get("role") == "tool")
        if self.tool_call_first and tool_results < self.tool_rounds and body_has_tools(messages):
            return chat(tool_calls=[("calculator", {"expression": "2 * 3"})])
        if self.malformed_technical:
            return chat('{"recommendation": "bullish", "trend_direction": ')
        view = {**self._technical_view(refs, text), **self.technical_labels}
        if self.invent_in_technical:
            view["notes"] += f" Price target {INVENTED}."
        return chat(json.dumps(view))

    @staticmethod
    def _technical_view(refs: list[str], text: str) -> dict[str, Any]:
        rsi = _RSI_RE.search(text)
        return {
            "recommendation": "neutral",
            "trend_direction": "sideways",
            # labels no indicator contradicts (agents.analysts.claims.label_problems)
            "trend_quality": "moderate",
            "support_levels": [],
            "resistance_levels": [],
            "extension_risk": "moderate",
            "notes": f"RSI(14) is {rsi.group(1)} in the indicators." if rsi else "No RSI was given.",
            "source_refs": [r for r in refs if r.startswith("technical_indicators")][:1],
        }

    def _synthesis(self, refs: list[str], text: str) -> dict[str, Any]:
        rsi = _NOTES_RSI_RE.search(text)  # copied from the technical analyst's result
        tech = next((r for r in refs if r.startswith("technical_indicators")), refs[0] if refs else "x")
        sentence = f"RSI(14) stands at {rsi.group(1) if rsi else 'an unknown level'}"
        if self.invent_number:
            sentence += f" and a target of {INVENTED}"
        sentence += "."
        statements = [sentence]
        if self.synthesis_statements is not None:
            value = rsi.group(1) if rsi else "unknown"
            statements = [s.format(rsi=value) for s in self.synthesis_statements]
        return {
            "signal": self.synthesis_signal,
            "confidence": 0.4,
            "rationale": [{"text": s, "source_refs": [tech]} for s in statements],
            "risks": ["The sentiment analyst had no news tool."],
        }


def body_has_tools(messages: list[dict[str, Any]]) -> bool:
    """True unless the loop already asked for the final answer (no tools offered then)."""
    last = str(messages[-1].get("content") or "") if messages else ""
    return not last.startswith("Tool budget reached")


#: Small-model failure modes replayed by :class:`SmallModel` (seen with 0.5B–8B instruct models
#: behind llama.cpp / Ollama without a schema grammar). "stubborn" modes repeat the mistake in
#: the repair round too; the others fix it once told what was wrong.
SMALL_MODEL_MODES: dict[str, bool] = {
    "clean": False,
    "schema_echo": False,  # answers with the JSON schema itself; the repair fills it in
    "schema_echo_filled": True,  # {"type": "object", "properties": {...values...}}
    "extra_fields": True,  # adds "target_price": 987.65 and a "reasoning" field
    "too_many_items": True,  # nine rationale statements where eight are allowed, long level lists
    "prose": True,  # "Sure! Here is the JSON: {...} Hope this helps."
    "truncated": False,  # cut off mid-object (max_tokens); the repair is complete
    "wrong_enum": False,  # "STRONG_BUY" / "very bullish"; the repair uses an allowed value
}


@dataclass
class SmallModel:
    """Responder replaying one small-model failure mode (``SMALL_MODEL_MODES``) for any agent.

    ``answers``: agent name → a valid answer (a dict of that agent's result model); the agent of
    a request is the ``[agent:NAME]`` marker of its system prompt. ``schema``: how the server
    treats a JSON-schema ``response_format``: ``"honour"`` (llama.cpp, vLLM, Ollama, OpenAI:
    decoding is constrained to the schema, so the answer is valid whatever the mode; llama.cpp's
    json-schema-to-grammar enforces required keys, enums, ``additionalProperties: false`` and
    ``maxItems``), ``"reject"`` (400, an older server), or ``"ignore"`` (accepted, not enforced).
    ``calls`` counts requests per agent.
    """

    mode: str
    answers: dict[str, dict[str, Any]]
    schema: str = "ignore"
    calls: dict[str, int] = field(default_factory=dict)

    def __call__(self, body: dict[str, Any]) -> Reply:
        messages = body.get("messages", [])
        system = str(messages[0].get("content", "")) if messages else ""
        match = re.search(r"\[agent:(\w+)\]", system)
        agent = match.group(1) if match else "technical"
        self.calls[agent] = self.calls.get(agent, 0) + 1
        valid = self.answers[agent]
        fmt = body.get("response_format") or {}
        if fmt.get("type") == "json_schema":
            if self.schema == "reject":
                return error(400, "response_format type json_schema is not supported")
            if self.schema == "honour":
                return chat(json.dumps(valid))
        last = str(messages[-1].get("content") or "") if messages else ""
        repair = last.startswith("Your answer is invalid")
        if repair and not SMALL_MODEL_MODES.get(self.mode, False):
            return chat(json.dumps(valid))
        return chat(self._failing(agent, valid))

    def _failing(self, agent: str, valid: dict[str, Any]) -> str:
        from agents.analysts.models import AGENT_MODELS

        text = json.dumps(valid)
        if self.mode == "schema_echo":
            return json.dumps(AGENT_MODELS[agent].model_json_schema())
        if self.mode == "schema_echo_filled":
            return json.dumps({"type": "object", "title": agent, "properties": valid})
        if self.mode == "extra_fields":
            return json.dumps({**valid, "target_price": float(INVENTED), "reasoning": "Looks strong."})
        if self.mode == "too_many_items":
            grown = dict(valid)
            for key, value in valid.items():
                if isinstance(value, list) and value:
                    grown[key] = (value * 12)[: max(9, len(value))] if key != "source_refs" else value
            return json.dumps(grown)
        if self.mode == "prose":
            return f"Sure! Here is the analysis you asked for:\n{text}\nHope this helps."
        if self.mode == "truncated":
            return text[: len(text) // 2]
        if self.mode == "wrong_enum":
            first = next(k for k, v in valid.items() if isinstance(v, str) and k != "notes")
            return json.dumps({**valid, first: "very " + str(valid[first]).lower()})
        return text


#: OpenAI's answer to a wrong key, which quotes the key it was sent (its real wording).
INCORRECT_KEY = (
    "Incorrect API key provided: {key}. You can find your API key at "
    "https://platform.openai.com/account/api-keys."
)


@dataclass
class KeyEcho:
    """Responder of a provider that quotes the API key it was sent in its error message, as
    OpenAI's 401 does (:data:`INCORRECT_KEY`): every request is refused with ``status`` (per
    served model name in ``status_by_model``, default 401; a 5xx is retried by the session,
    so ``num_retries`` + 1 attempts each echo the key). The key is read from the request's
    ``Authorization: Bearer`` header (``ScriptedLLM.current_headers``). ``keys`` lists the keys
    seen."""

    server: ScriptedLLM
    status: int = 401
    status_by_model: dict[str, int] = field(default_factory=dict)
    keys: list[str] = field(default_factory=list)
    #: Also quote the key in every other form (``tests.support.secrets.echoed_forms``: spaced
    #: out, base64, reversed, hex, escaped, its first and last 12 characters).
    every_form: bool = False

    def __call__(self, body: dict[str, Any]) -> Reply:
        auth = self.server.current_headers().get("authorization", "")
        key = auth.removeprefix("Bearer ").strip()
        self.keys.append(key)
        status = self.status_by_model.get(str(body.get("model")), self.status)
        message = INCORRECT_KEY.format(key=key)
        if self.every_form:
            from tests.support.secrets import echoed_forms

            forms = echoed_forms(key)
            message += " Received: " + "; ".join(
                f"{name}={form}" for name, form in forms.items() if name != "exact"
            )
        return error(status, message)


@dataclass
class ExampleCopier:
    """A model that returns the example answer of its system prompt unchanged (the text after
    ``Example:``, ``agents.analysts.prompts.ANSWER_SHAPE``), whatever the data: the copying a
    small model may do. Answers "{}" to a prompt without an example. ``bodies`` keeps every
    request."""

    bodies: list[dict[str, Any]] = field(default_factory=list)

    def __call__(self, body: dict[str, Any]) -> Reply:
        self.bodies.append(body)
        messages = body.get("messages", [])
        system = str(messages[0].get("content", "")) if messages else ""
        _, found, example = system.rpartition(" Example: ")
        return chat(example.strip() if found else "{}")


class HintEcho:
    """A model that answers each analyst and the synthesis valid JSON (judgements
    "neutral"-like, the first tool_call_id of the user message cited) whose ``notes`` are the
    prompt's description of ``notes`` written back (the synthesis: as its one statement): what
    the real 0.5B model did with a placeholder in the prose field. ``notes``: other notes by
    analyst (``"technical"``, ``"fundamental"``, ``"sentiment"``), e.g. what the real model
    wrote; ``"READING"`` there stands for the last computed reading of the user message,
    ``"READINGS"`` for all of them joined by a space. ``labels``: answer fields replacing the
    analyst's (e.g. a wrong ``trend_direction``); ``corrections``: the notes of the analyst's
    reply to a correction request (its first answer's notes otherwise).
    ``bodies`` keeps every request."""

    def __init__(
        self,
        notes: dict[str, str] | None = None,
        *,
        labels: dict[str, dict[str, Any]] | None = None,
        corrections: dict[str, str] | None = None,
    ) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.notes = dict(notes or {})
        self.labels = dict(labels or {})
        self.corrections = dict(corrections or {})

    def __call__(self, body: dict[str, Any]) -> Reply:
        self.bodies.append(body)
        system, user = (str(m.get("content", "")) for m in body["messages"][:2])
        found = _TOOL_CALL_ID_RE.search(user)
        ref = found.group(1) if found else "none"
        common = {"notes": FIELD_HINTS["notes"], "source_refs": [ref]}
        if "synthesis" in system:
            statement = {"text": FIELD_HINTS["notes"], "source_refs": [ref]}
            return chat(
                json.dumps({"signal": "HOLD", "confidence": 0.5, "rationale": [statement], "risks": []})
            )
        if "technical" in system:
            name, answer = "technical", AgentPlayer._technical_view([ref], "")
        elif "fundamental" in system:
            name, answer = "fundamental", {"outlook": "neutral", "missing_data": []}
        else:
            name, answer = "sentiment", {"label": "neutral", "news_risk": "low", "missing_data": []}
        notes = self.notes.get(name)
        if notes is not None:
            readings = [x for x in user.splitlines() if x.startswith("Readings computed")]
            shown = json.loads(readings[-1].split(": ", 1)[1]) if readings else []
            common["notes"] = notes.replace("READINGS", " ".join(shown)).replace(
                "READING", shown[-1] if shown else ""
            )
        correcting = "Rewrite your answer" in str(body["messages"][-1].get("content") or "")
        if correcting and name in self.corrections:
            common["notes"] = self.corrections[name]
        return chat(json.dumps({**answer, **self.labels.get(name, {}), **common}))
