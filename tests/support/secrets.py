"""The secret the masking tests configure, and the fixture that configures it (a pytest plugin
registered in tests/conftest.py)."""

from __future__ import annotations

import pytest

from core.settings import get_settings

#: An LLM API key as providers shape them (≥ 8 characters, so it is masked, docs/security.md).
KEY = "sk-TESTabc123def456ghi789"
#: What a provider answering 401 echoes back (OpenAI's wording).
ECHO = f"Incorrect API key provided: {KEY}"


@pytest.fixture
def secret(clean_settings: None, monkeypatch: pytest.MonkeyPatch) -> str:
    """``FINAGENT_LLM_API_KEY`` set to :data:`KEY` (settings re-read)."""
    monkeypatch.setenv("FINAGENT_LLM_API_KEY", KEY)
    get_settings.cache_clear()
    return KEY
