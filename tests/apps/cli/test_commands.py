"""The shape of ``finagent``: every command of the table loads, ``--help`` prints each one's
summary whole and imports no command module, every subcommand of a group has a short help of
its own (click would cut a docstring's first sentence mid-phrase), and the commands people run
all day load none of the heavy libraries."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from apps.cli import COMMANDS, main
from apps.cli.lazy import SUMMARY_WIDTH

REPO_ROOT = Path(__file__).resolve().parents[3]
#: Libraries the everyday reading commands must not load: the analysis stack (pandas, numpy,
#: numba, pandas-ta), the queue (Celery, kombu), the LLM client, plotting, the web framework and
#: the migration tool.
HEAVY = (
    "pandas",
    "numpy",
    "numba",
    "pandas_ta",
    "celery",
    "kombu",
    "litellm",
    "matplotlib",
    "scipy",
    "fastapi",
    "alembic",
    "yfinance",
)


def _walk(command: click.Command, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], click.Command]]:
    """Every command under ``command`` (loading the lazy ones), with its path."""
    found: list[tuple[tuple[str, ...], click.Command]] = []
    if isinstance(command, click.Group):
        with click.Context(command) as ctx:
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                assert sub is not None, (*path, name)
                found.append(((*path, name), sub))
                found.extend(_walk(sub, (*path, name)))
    return found


def test_every_command_of_the_table_loads_with_its_summary() -> None:
    commands = dict(_walk(main))
    assert {path[0] for path in commands} == set(COMMANDS)
    for name, spec in COMMANDS.items():
        assert commands[(name,)].short_help == spec.summary
        assert 0 < len(spec.summary) <= SUMMARY_WIDTH, name


def test_every_subcommand_has_a_short_help_that_fits() -> None:
    """A group's ``--help`` shows the short help as given; without one, click cuts the
    docstring's first sentence at the terminal's width ("Analyze SYMBOL (e.g.")."""
    for path, command in _walk(main):
        if len(path) > 1:
            assert command.short_help, f"finagent {' '.join(path)} has no short_help"
            assert len(command.short_help) <= SUMMARY_WIDTH, path


def test_help_lists_every_summary_whole() -> None:
    result = CliRunner().invoke(main, ["--help"], terminal_width=80)
    assert result.exit_code == 0
    for name, spec in COMMANDS.items():
        assert f"  {name}" in result.output and spec.summary in result.output, name
    assert "..." not in result.output.split("Commands:", 1)[1]


def _loaded_after(*argv: str, env: dict[str, str] | None = None) -> set[str]:
    """The modules ``finagent ARGV`` leaves in ``sys.modules`` (run in a fresh interpreter)."""
    code = (
        "import sys\nfrom tasks.main import main\n"
        "try:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
        "print(' '.join(sorted(sys.modules)), file=sys.stderr)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, *argv],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return set(proc.stderr.strip().splitlines()[-1].split())


def test_help_imports_no_command_module() -> None:
    loaded = _loaded_after("--help")
    assert {m for m in loaded if m.startswith("apps.cli.")} == {"apps.cli.lazy"}
    assert not {m for m in loaded if m.split(".")[0] in {"core", "db", "agents", "sqlalchemy", "pydantic"}}


@pytest.mark.parametrize("argv", [("list",), ("list", "--json"), ("show", "no-such-id")], ids=" ".join)
def test_reading_commands_load_no_heavy_library(tmp_path: Path, argv: tuple[str, ...]) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FINAGENT_")}
    env["FINAGENT_SERVICE_STATE_DIR"] = str(tmp_path)
    _loaded_after("list", env=env)  # the first start migrates the new SQLite file (Alembic)
    loaded = _loaded_after(*argv, env=env)
    assert "db.repo" in loaded  # the command ran as far as the database
    assert sorted(m for m in HEAVY if m in loaded) == []
