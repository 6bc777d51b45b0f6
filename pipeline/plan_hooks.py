"""The plan lookup: the behaviour of each analysis type of the plan table (``core.plans``), as
the plan packages declare it.

Every package under ``pipeline/plans/`` exports the plans it implements (``PLANS``, a tuple of
:class:`~pipeline.plans.base.Plan`: what its type adds to the shared pipeline: its step of the
analysis stage, the pydantic model its request options are validated by, whether review may
finish an analysis on its result alone, its report headline and section, the value of its result
in the JSON report, what it draws on ``finagent chart``, and whether a request without price
history is still its to answer). :mod:`pipeline.plans.table` imports each package in code, one
line each. The shared code (the analysis and review stages, the report, the producer, the chart
command) asks :func:`plan_for` and never names a type.

The table is imported at the first lookup (:func:`_load`, a static import inside the function,
so import-linter sees the edge and the CLI's start does not pay for the plans' imports). The
imports run one way: the shared code → this module → the table → the plan packages → what they
use (``pipeline.plans.base``, ``pipeline.records``, ``pipeline.report_format``), never back to the
stages, the report or this module. After the load every row of the table must have exactly one
plan and every plan a row, else the first lookup fails naming the difference: a plan cannot be
silently missing.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from core.plans import PLANS as ROWS
from core.plans import plan_spec, result_specs
from pipeline.plans.base import Plan

_REGISTERED: dict[str, Plan] = {}
_LOADED = False
_LOCK = threading.RLock()


def _register(plan: Plan) -> None:
    name = plan.spec.name
    if name in _REGISTERED and _REGISTERED[name] is not plan:
        raise RuntimeError(f"two plans register the analysis type {name!r}")
    _REGISTERED[name] = plan


def register_plan(plan: Plan) -> Plan:
    """Register ``plan`` under its row's name, after the table's plans (:func:`_load`); for a
    test or an embedding program that adds a plan of its own (its row must be in ``core.plans``).

    Raises:
        RuntimeError: another plan is registered under that name already.
    """
    _load()
    with _LOCK:
        _register(plan)
    return plan


def _load() -> None:
    """Register the plans of :mod:`pipeline.plans.table` once, then check that they are exactly
    the table's rows.

    Raises:
        RuntimeError: a row without a plan, a plan without a row, or two plans of one name.
    """
    global _LOADED
    if _LOADED:
        return
    with _LOCK:
        if _LOADED:
            return
        from pipeline.plans.table import PLANS  # at the first lookup (module docstring)

        for plan in PLANS:
            _register(plan)
        rows = {spec.name for spec in ROWS}
        missing, extra = rows - set(_REGISTERED), set(_REGISTERED) - rows
        if missing or extra:
            raise RuntimeError(
                f"plan table and plan packages differ: rows without a plan {sorted(missing)}, "
                f"plans without a row {sorted(extra)}"
            )
        _LOADED = True


def plan_for(name: str | None) -> Plan:
    """The behaviour of analysis type ``name`` (``None``: the default type).

    Raises:
        KeyError: ``name`` is no analysis type (``core.plans.PLANS``).
        RuntimeError: the plan packages and the table differ (:func:`_load`).
    """
    spec = plan_spec(name)
    _load()
    return _REGISTERED[spec.name]


def result_plans() -> tuple[Plan, ...]:
    """The plans that store a result, in table order (the JSON report's keys)."""
    return tuple(plan_for(spec.name) for spec in result_specs())


def validate_plan_options(name: str | None, options: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """``options`` validated by the plan's own model and dumped as JSON without unset keys
    (``None`` for no options).

    Raises:
        ValueError: the plan takes no options, or the model refuses them (the message names
            each offending key and why, one line).
    """
    if not options:
        return None
    plan = plan_for(name)
    type_name = plan.spec.name
    if plan.options_model is None:
        raise ValueError(f"the {type_name} analysis takes no plan options (got {', '.join(sorted(options))})")
    try:
        model = plan.options_model.model_validate(dict(options))
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'options'}: {err['msg']}" for err in exc.errors()
        )
        raise ValueError(f"{type_name} plan options: {problems}") from None
    dumped: dict[str, Any] = model.model_dump(mode="json", exclude_none=True)
    return dumped or None


__all__ = ["Plan", "plan_for", "register_plan", "result_plans", "validate_plan_options"]
