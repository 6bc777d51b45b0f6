"""``calculator`` (docs/design.md, "Calculator"): safe arithmetic on an expression string.

Evaluated by simpleeval (an AST whitelist; never ``eval``): numbers, + - * / // % **, parentheses,
comparisons, and the functions abs, round, min, max, sqrt, log, exp. Names, attributes, imports,
strings, containers and huge powers are refused. Results must be finite real numbers.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from simpleeval import InvalidExpression, SimpleEval

from agents.tools.registry import ToolContext, ToolInputError, ToolOutput, register

_FUNCTIONS: dict[str, Any] = {
    "abs": abs,
    "round": round,
    "min": min,
    "max": max,
    "sqrt": math.sqrt,
    "log": math.log,
    "exp": math.exp,
}
MAX_EXPRESSION_LENGTH = 500  # generous for formulas; bounds parse time and log size
CHECK_HINT = "Check the expression."


class CalculatorInput(BaseModel):
    """``{expression}``: e.g. ``"2 + 3 * 4"``."""

    model_config = ConfigDict(extra="forbid")

    expression: str = Field(
        min_length=1, max_length=MAX_EXPRESSION_LENGTH, description="Arithmetic expression"
    )


def evaluate(expression: str) -> float:
    """Evaluate ``expression`` safely and return a finite float.

    Raises:
        ToolInputError: division by zero ("Cannot divide by zero."), a forbidden
            construct (names, attributes, imports, strings), a non-numeric or non-finite result.
    """
    evaluator = SimpleEval(functions=_FUNCTIONS, names={})
    try:
        value = evaluator.eval(expression)
    except ZeroDivisionError:
        raise ToolInputError("Cannot divide by zero.", retry_hint=CHECK_HINT) from None
    except InvalidExpression as exc:
        raise ToolInputError(f"Invalid expression: {exc}", retry_hint=CHECK_HINT) from None
    except (SyntaxError, TypeError, ValueError, OverflowError) as exc:
        raise ToolInputError(
            f"Invalid expression: {type(exc).__name__}: {exc}", retry_hint=CHECK_HINT
        ) from None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ToolInputError(
            f"Expression must evaluate to a number, got {type(value).__name__}.", retry_hint=CHECK_HINT
        )
    result = float(value)
    if not math.isfinite(result):
        raise ToolInputError("Result is not a finite number.", retry_hint=CHECK_HINT)
    return result


@register(
    name="calculator",
    description=(
        "Evaluate an arithmetic expression safely "
        "(numbers, + - * / ** %, abs, round, min, max, sqrt, log, exp)."
    ),
    input_model=CalculatorInput,
)
def calculator(params: CalculatorInput, ctx: ToolContext) -> ToolOutput:
    """Output: ``{status: "success", result, expression}``."""
    result = evaluate(params.expression)
    return ToolOutput(
        data={"status": "success", "result": result, "expression": params.expression},
        summary=f"{params.expression} = {result:g}",
    )
