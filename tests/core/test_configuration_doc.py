"""docs/configuration.md is generated from the settings and must not drift from them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from core.settings import Settings
from core.settings_doc import render

ROOT = Path(__file__).resolve().parents[2]


def test_the_file_matches_the_settings() -> None:
    text = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert text == render(), "regenerate: uv run python -m core.settings_doc > docs/configuration.md"


def test_every_setting_has_a_row_under_its_environment_name() -> None:
    names = set(re.findall(r"^\| `(FINAGENT_[A-Z0-9_]+)` \|", render(), flags=re.M))
    assert names == {f"FINAGENT_{name.upper()}" for name in Settings.model_fields}
    assert "FINAGENT_DATA_PROVIDER" in names and "FINAGENT_LLM_API_KEY" in names


def test_no_secret_default_is_printed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FINAGENT_LLM_API_KEY", "sk-not-in-the-doc-123")
    assert "sk-not-in-the-doc-123" not in render()
