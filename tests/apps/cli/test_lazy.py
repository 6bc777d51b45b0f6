"""How ``finagent`` imports a command's module: in its own process (``tasks.main.main``) with the
garbage collector paused and what was loaded frozen out of its sight; called in-process (a test's
``CliRunner``) like any import, the collector left as it was."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from apps.cli import lazy
from apps.cli.lazy import LazyCommand, LazyGroup

REPO_ROOT = Path(__file__).resolve().parents[3]

#: A light command module (click and the CLI's common helpers).
_TARGET = "apps.cli.chart:chart_command"


def _group() -> LazyGroup:
    return LazyGroup(lazy={"chart": LazyCommand(_TARGET, "Draw a chart")})


@pytest.fixture
def settled() -> Iterator[None]:
    """:func:`lazy.settle_imports` on for the test; afterwards off, the frozen objects handed back
    to the collector and its state restored."""
    was_enabled = gc.isenabled()
    lazy.settle_imports(True)
    try:
        yield
    finally:
        lazy.settle_imports(False)
        gc.unfreeze()
        if was_enabled:
            gc.enable()
        else:
            gc.disable()


def test_an_in_process_group_leaves_the_collector_alone() -> None:
    before = gc.get_freeze_count()
    with click.Context(_group()) as ctx:
        command = _group().get_command(ctx, "chart")
    assert isinstance(command, click.Command) and command.short_help == "Draw a chart"
    assert gc.get_freeze_count() == before


@pytest.mark.usefixtures("settled")
@pytest.mark.parametrize("enabled", [True, False], ids=["collector-on", "collector-off"])
def test_a_settled_import_freezes_what_is_loaded_and_restores_the_collector(enabled: bool) -> None:
    gc.unfreeze()
    if enabled:
        gc.enable()
    else:
        gc.disable()
    with click.Context(_group()) as ctx:
        command = _group().get_command(ctx, "chart")
    assert isinstance(command, click.Command)
    assert "apps.cli.chart" in sys.modules
    assert gc.get_freeze_count() > 0
    assert gc.isenabled() is enabled


@pytest.mark.usefixtures("settled")
def test_a_settled_import_that_fails_still_restores_the_collector() -> None:
    gc.enable()
    group = LazyGroup(lazy={"gone": LazyCommand("apps.cli.no_such_module:command", "Nothing")})
    with click.Context(group) as ctx, pytest.raises(ModuleNotFoundError):
        group.get_command(ctx, "gone")
    assert gc.isenabled()


def test_the_finagent_process_runs_its_command_settled(tmp_path: Path) -> None:
    """``tasks.main.main`` (the ``finagent`` entry point) switches settling on: after ``finagent
    list`` the command's imports sit in the permanent generation, the collector still runs, and
    the command exited with its own code."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FINAGENT_")}
    env["FINAGENT_SERVICE_STATE_DIR"] = str(tmp_path)
    code = (
        "import gc, sys\nfrom tasks.main import main\n"
        "try:\n    main(['list', '--json'])\nexcept SystemExit as exc:\n    status = exc.code\n"
        "print(status, gc.get_freeze_count(), gc.isenabled(), 'apps.cli.analyses' in sys.modules,"
        " file=sys.stderr)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    status, frozen, enabled, loaded = proc.stderr.strip().splitlines()[-1].split()
    assert status in ("0", "None"), proc.stderr[-2000:]
    assert int(frozen) > 10_000  # click, pydantic, SQLAlchemy and the command's own modules
    assert (enabled, loaded) == ("True", "True")
