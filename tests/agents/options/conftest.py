"""Fixtures of the option tests: the real option snapshots of ../shared/data/options."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import SHARED_DATA

OPTIONS_DIR = SHARED_DATA / "options"


@pytest.fixture
def options_dir() -> Path:
    """The shared option-chain snapshots; skips when ../shared is absent."""
    if not OPTIONS_DIR.is_dir():
        pytest.skip(f"shared option chains not found at {OPTIONS_DIR} (only present in the workplace)")
    return OPTIONS_DIR
