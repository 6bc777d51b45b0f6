"""docs/configuration.md is generated from the settings and must not drift from them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from core.settings import GROUPS, env_name, flat_fields
from core.settings_doc import render

ROOT = Path(__file__).resolve().parents[2]


def _sections(text: str) -> dict[str, set[str]]:
    """``## group`` heading -> the FINAGENT_* names of the rows below it."""
    sections: dict[str, set[str]] = {}
    current: set[str] | None = None
    for line in text.splitlines():
        if line.startswith("## Old names"):
            break
        if line.startswith("## "):
            current = sections.setdefault(line[3:].strip(), set())
        match = re.match(r"^\| `(FINAGENT_[A-Z0-9_]+)` \|", line)
        if match:
            assert current is not None, f"{match.group(1)} is outside every group"
            current.add(match.group(1))
    return sections


def test_the_file_matches_the_settings() -> None:
    text = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert text == render(), "regenerate: uv run python -m core.settings_doc > docs/configuration.md"


def test_every_setting_has_a_row_under_its_environment_name() -> None:
    current = render().split("## Old names")[0]
    names = re.findall(r"^\| `(FINAGENT_[A-Z0-9_]+)` \|", current, flags=re.M)
    assert len(names) == len(set(names)), "a variable has two rows"
    assert set(names) == {f"FINAGENT_{name.upper()}" for name in flat_fields()}
    assert "FINAGENT_DATA_PROVIDER" in names and "FINAGENT_LLM_API_KEY" in names


def test_each_group_has_its_own_table_with_exactly_its_settings() -> None:
    sections = _sections(render())
    assert list(sections) == list(GROUPS)
    for group, model in GROUPS.items():
        assert sections[group] == {env_name(group, name) for name in model.model_fields}, group
    # spot checks of the grouping itself, written out by hand
    assert "FINAGENT_OPTIONS_DELTA_MIN" in sections["options"]
    assert "FINAGENT_BROKER_ALPACA_API_KEY" in sections["broker"]
    assert "FINAGENT_BROKER_FEE_PER_SHARE" in sections["broker"]
    assert "FINAGENT_DURABILITY_LEASE_SECONDS" in sections["durability"]
    assert "FINAGENT_WATCHLISTS_TENANT_MAX_WATCHLISTS" in sections["watchlists"]


def test_units_are_shown() -> None:
    row = next(
        line for line in render().splitlines() if line.startswith("| `FINAGENT_DURABILITY_TASK_TIME_LIMIT`")
    )
    assert row.split("|")[3].strip() == "s"
    row = next(line for line in render().splitlines() if line.startswith("| `FINAGENT_BROKER_FEE_MINIMUM`"))
    assert row.split("|")[3].strip() == "USD"


def test_the_state_dir_default_does_not_depend_on_the_machine() -> None:
    row = next(line for line in render().splitlines() if line.startswith("| `FINAGENT_SERVICE_STATE_DIR`"))
    assert str(Path.home()) not in row and "XDG_STATE_HOME" in row


def test_no_secret_default_is_printed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FINAGENT_LLM_API_KEY", "sk-not-in-the-doc-123")
    assert "sk-not-in-the-doc-123" not in render()


def test_the_old_names_are_listed_with_their_new_ones() -> None:
    old = render().split("## Old names")[1]
    pairs = dict(re.findall(r"^\| `(FINAGENT_[A-Z0-9_]+)` \| `(FINAGENT_[A-Z0-9_]+)` \|$", old, flags=re.M))
    assert pairs["FINAGENT_CSP_MIN_WEEKLY_ROC"] == "FINAGENT_OPTIONS_MIN_WEEKLY_ROC"
    assert pairs["FINAGENT_TASK_SOFT_TIME_LIMIT"] == "FINAGENT_DURABILITY_TASK_SOFT_TIME_LIMIT"
    assert pairs["FINAGENT_BROKER_URL"] == "FINAGENT_SERVICE_BROKER_URL"
    assert "FINAGENT_LLM_MODEL" not in pairs  # unchanged names are not listed
    current = {f"FINAGENT_{name.upper()}" for name in flat_fields()}
    assert set(pairs.values()) <= current and not set(pairs) & current
