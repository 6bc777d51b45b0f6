"""Fixtures: the scripted OpenAI-compatible server and an LLM configuration pointing at it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.llm.server import ScriptedLLM


@pytest.fixture
def llm_server() -> Iterator[ScriptedLLM]:
    """A started ``ScriptedLLM`` on 127.0.0.1 (stopped at teardown)."""
    server = ScriptedLLM().start()
    yield server
    server.stop()
