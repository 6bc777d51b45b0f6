"""The analysts the research and recommendation stages run by their own code are exactly their
rows of ``agents.analysts.table``: a row added to the table without code in its stage (or code
for an analyst whose row was removed) fails here instead of being silently skipped. The analysis
stage checks its runners against its rows when it is imported (``pipeline.stages.analysis``)."""

from __future__ import annotations

from agents.analysts.table import Stage, of_stage
from pipeline.stages.recommendation import RECOMMENDATION_ANALYSTS
from pipeline.stages.research import RESEARCH_ANALYSTS


def _mismatch(stage: Stage, runs: frozenset[str]) -> str:
    """What differs between ``stage``'s rows of the table and the analysts its code ``runs``,
    in words; empty when they match."""
    rows = {row.name for row in of_stage(stage)}
    parts = []
    if rows - runs:
        parts.append(f"rows without code in pipeline/stages/{stage}.py: {sorted(rows - runs)}")
    if runs - rows:
        parts.append(f"analysts pipeline/stages/{stage}.py runs without a row: {sorted(runs - rows)}")
    return "; ".join(parts)


def test_the_research_stage_runs_exactly_its_rows_of_the_analyst_table() -> None:
    assert _mismatch("research", RESEARCH_ANALYSTS) == ""


def test_the_recommendation_stage_runs_exactly_its_rows_of_the_analyst_table() -> None:
    assert _mismatch("recommendation", RECOMMENDATION_ANALYSTS) == ""


def test_a_mismatch_is_named_both_ways() -> None:
    assert _mismatch("research", RESEARCH_ANALYSTS - {"social"} | {"ghost"}) == (
        "rows without code in pipeline/stages/research.py: ['social']; "
        "analysts pipeline/stages/research.py runs without a row: ['ghost']"
    )
