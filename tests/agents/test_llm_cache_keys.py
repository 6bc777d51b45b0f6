"""``agents.llm.cache`` keys: the same question about the same data has the same key in every
analysis (record ids replaced by placeholders), anything else that changes the answer changes
it, and a cached answer's citations are translated to the asking analysis's ids."""

from __future__ import annotations

import hashlib
import json

from agents.llm.cache import request_ids, translate

TOOLS = [{"type": "function", "function": {"name": "get_history", "parameters": {"type": "object"}}}]


def _messages(history_ref: str, analysis_id: str, text: str = "Analyse AAPL") -> list[dict[str, object]]:
    return [
        {"role": "system", "content": f"Analysis {analysis_id}. Known tool_call_ids: ['{history_ref}']"},
        {"role": "user", "content": text},
    ]


def test_ids_of_another_analysis_give_the_same_key_and_content_a_different_one() -> None:
    a, ids_a = request_ids(
        model="m",
        messages=_messages("get_history_0123456789ab", "6f1c1d8e-4f0b-4a53-9d51-6a1f2c7e9b10"),
        tools=TOOLS,
        params={"max_tokens": 100, "num_retries": 0},
    )
    b, ids_b = request_ids(
        model="m",
        messages=_messages("get_history_ba9876543210", "0b8f5c3e-2d4a-4c7e-9a61-3f1d2e5b7c90"),
        tools=TOOLS,
        params={"max_tokens": 100, "num_retries": 3},  # retries do not change an answer
    )
    assert a == b
    assert ids_a == {"6f1c1d8e-4f0b-4a53-9d51-6a1f2c7e9b10": "<ref#1>", "get_history_0123456789ab": "<ref#2>"}
    assert ids_b["get_history_ba9876543210"] == "<ref#2>"
    base = {
        "model": "m",
        "messages": _messages("get_history_0123456789ab", "x"),
        "tools": TOOLS,
        "params": {},
    }
    changed = [
        {**base, "model": "other"},
        {**base, "messages": _messages("get_history_0123456789ab", "x", "Analyse MSFT")},
        {**base, "tools": None},
        {**base, "params": {"max_tokens": 200}},
        {**base, "params": {"response_format": {"type": "json_object"}}},
    ]
    keys = {request_ids(**c)[0] for c in [base, *changed]}  # type: ignore[arg-type]
    assert len(keys) == 1 + len(changed)


def test_the_key_is_the_sha256_of_the_canonical_normalised_request() -> None:
    messages = [{"role": "user", "content": "see get_history_0123456789ab"}]
    key, _ = request_ids(model="m", messages=messages, tools=None, params={"max_tokens": 16})
    # written out by hand: sorted keys, no spaces, the id replaced by its placeholder
    canonical = (
        '{"messages":[{"content":"see <ref#1>","role":"user"}],"model":"m",'
        '"params":{"max_tokens":16},"tools":null}'
    )
    assert key == hashlib.sha256(canonical.encode()).hexdigest()


def test_translate_maps_a_cached_answer_to_the_asking_analysis() -> None:
    answer = {"content": json.dumps({"source_refs": ["get_history_0123456789ab"], "text": "RSI 55"})}
    stored = translate(answer, {"get_history_0123456789ab": "<ref#2>"})
    assert json.loads(stored["content"])["source_refs"] == ["<ref#2>"]
    served = translate(stored, {"<ref#2>": "get_history_ba9876543210"})
    assert json.loads(served["content"]) == {"source_refs": ["get_history_ba9876543210"], "text": "RSI 55"}
