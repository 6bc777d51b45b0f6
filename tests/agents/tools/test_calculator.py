"""calculator tool: safe arithmetic, its error texts, envelope shape."""

from __future__ import annotations

from datetime import date

import pytest

from agents.data.market.embedded import EmbeddedProvider
from agents.tools.catalog import run_tool
from agents.tools.registry import ToolContext
from core.settings import Settings


@pytest.fixture
def ctx() -> ToolContext:
    return ToolContext(settings=Settings(), as_of=date(2013, 3, 1), provider=EmbeddedProvider())


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("2 + 3 * 4", 14.0),
        ("(2 + 3) * 4", 20.0),
        ("2 ** 10", 1024.0),
        ("sqrt(16) + abs(-2)", 6.0),
        ("max(1, 2.5, 2)", 2.5),
        ("437.0 - 2 * 12.5", 412.0),
        ("7 // 2 + 7 % 2", 4.0),
        ("-3.5", -3.5),
    ],
)
def test_arithmetic(ctx: ToolContext, expression: str, expected: float) -> None:
    env = run_tool(name="calculator", arguments={"expression": expression}, ctx=ctx)
    assert env.ok
    assert env.data == {"status": "success", "result": expected, "expression": expression}
    assert env.source_refs == [env.tool_call_id]


def test_division_by_zero_gives_the_seed_error(ctx: ToolContext) -> None:
    env = run_tool(name="calculator", arguments={"expression": "10/0"}, ctx=ctx)
    public = env.to_public()
    assert public["error"] == {"code": "INVALID_INPUT", "message": "Cannot divide by zero."}
    assert public["retry_hint"] == "Check the expression."
    assert ctx.rows[-1]["status"] == "error" and ctx.rows[-1]["level"] == "ERROR"


@pytest.mark.parametrize(
    "expression",
    [
        "__import__('os')",
        "__import__('os').system('true')",
        "().__class__.__mro__",
        "open('/etc/passwd')",
        "eval('1')",
        "x + 1",
        "'a' * 10",
        "[1, 2]",
        "9 ** 9 ** 9",
        "1e308 * 10",
        "lambda: 1",
        "1 +",
    ],
)
def test_unsafe_or_invalid_expressions_are_refused(ctx: ToolContext, expression: str) -> None:
    env = run_tool(name="calculator", arguments={"expression": expression}, ctx=ctx)
    assert not env.ok
    assert env.error is not None and env.error.code.value == "INVALID_INPUT"
    assert env.retry_hint


def test_empty_and_oversized_expressions_fail_validation(ctx: ToolContext) -> None:
    for bad in ({"expression": ""}, {"expression": "1+" * 400 + "1"}, {}, {"expression": "1", "extra": 2}):
        env = run_tool(name="calculator", arguments=bad, ctx=ctx)
        assert env.error is not None and env.error.code.value == "INVALID_INPUT"
