"""The stage table: the order of a pass, its statuses and its queues, read by every part."""

from __future__ import annotations

import pytest

from core import stages
from core.stages import STAGES, STATUS_RANK, Status, next_stage, stage, stage_of_status


def test_a_pass_is_the_seed_001_order() -> None:
    assert [s.name for s in STAGES] == ["research", "analysis", "recommendation", "review"]
    assert [s.status for s in STAGES] == [
        Status.RESEARCHING,
        Status.ANALYZING,
        Status.RECOMMENDING,
        Status.REVIEWING,
    ]
    assert [s.task_name for s in STAGES] == [
        "finagent.research",
        "finagent.analysis",
        "finagent.recommendation",
        "finagent.review",
    ]
    interactive = ("research", "analysis", "recommendation", "review")
    batch = ("research.batch", "analysis.batch", "recommendation.batch", "review.batch")
    assert stages.QUEUES == (*interactive, *batch, "control")
    assert stages.LANE_QUEUES["interactive"] == (*interactive, "control")
    assert stages.LANE_QUEUES["batch"] == (*batch, "control")
    assert [s.queue_for("batch") for s in STAGES] == list(batch)
    assert [s.queue_for("interactive") for s in STAGES] == list(interactive)


def test_rank_orders_the_statuses_and_ties_the_terminal_ones() -> None:
    ordered = ["queued", "researching", "analyzing", "recommending", "reviewing"]
    assert [STATUS_RANK[s] for s in ordered] == [-1, 0, 1, 2, 3]
    assert STATUS_RANK["done"] == STATUS_RANK["failed"] > STATUS_RANK["reviewing"]
    assert stages.ANALYSIS_STATUSES == (*ordered, "done", "failed")
    assert [stages.check_status(s) for s in ordered] == [-1, 0, 1, 2, 3]
    with pytest.raises(ValueError, match="status must be one of"):
        stages.check_status("thinking")


def test_steps_name_where_a_pass_resumes_from_its_checkpoint() -> None:
    # the order of a pass: research → analysis → recommendation → review → should_continue
    assert stages.step_after(None) == "research"
    assert stages.step_after("research") == "analysis"
    assert stages.step_after("review") == stages.END_OF_PASS == "should_continue"
    assert stages.step_before("research") is None
    assert stages.step_before("recommendation") == "analysis"
    assert stages.step_before(stages.END_OF_PASS) == "review"
    with pytest.raises(KeyError, match="unknown stage"):
        stages.step_after("sleeping")


def test_navigation() -> None:
    assert next_stage("research") == stage("analysis")
    assert next_stage("review") is None
    assert stage_of_status("recommending") == "recommendation"
    assert stage_of_status("done") is None
    assert stage_of_status("nonsense") is None
    with pytest.raises(KeyError, match="known: research, analysis"):
        stage("thinking")
