"""The shape of ``finagent``: every command of the table loads, ``--help`` prints each one's
summary whole and imports no command module, every subcommand of a group has a short help of
its own (click would cut a docstring's first sentence mid-phrase), and the commands people run
all day load none of the heavy libraries."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import date
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from apps.cli import COMMANDS, main
from apps.cli.lazy import SUMMARY_WIDTH

REPO_ROOT = Path(__file__).resolve().parents[3]
#: Libraries the everyday reading commands must not load: the analysis stack (pandas, numpy,
#: numba, pandas-ta), the queue (Celery, kombu), the LLM client, plotting, the web framework,
#: the migration tool, SQLAlchemy's ORM (the tables are Core tables) and the exchange calendar.
HEAVY = (
    "sqlalchemy.orm",
    "exchange_calendars",
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


def _loaded_after(*argv: str, env: dict[str, str] | None = None, timeout: float = 120) -> set[str]:
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
        timeout=timeout,
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


def _state_env(tmp_path: Path) -> dict[str, str]:
    """The environment of an embedded-mode command with ``tmp_path`` as its state folder."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FINAGENT_")}
    env["FINAGENT_SERVICE_STATE_DIR"] = str(tmp_path)
    return env


def test_a_tool_call_loads_its_data_but_no_queue_llm_plot_or_orm(tmp_path: Path) -> None:
    """``finagent tool get_stock_data`` needs pandas (its bars) and the database (its row),
    nothing of the queue, the LLM client, plotting, scipy, the ORM or the exchange calendar."""
    env = _state_env(tmp_path)
    _loaded_after("list", env=env)  # the first start migrates the new SQLite file (Alembic)
    loaded = _loaded_after("tool", "get_stock_data", '{"symbol": "MSFT"}', "--as-of", "2010-06-30", env=env)
    assert "agents.tools.market" in loaded and "pandas" in loaded  # the tool ran
    not_needed = set(HEAVY) - {"pandas", "numpy"} | {"scipy.special", "agents.quant.risk"}
    assert sorted(m for m in not_needed if m in loaded) == []


def test_a_warm_analysis_loads_neither_scipy_signal_nor_the_exchange_calendar(tmp_path: Path) -> None:
    """A second ``finagent analyze`` of the day: its risk forecast filters variances without
    scipy.signal (and the scipy.stats, optimize and interpolate it imports) and reads the NYSE
    session days kept by the first, without exchange_calendars; no ORM, no LLM client, no
    plotting."""
    env = _state_env(tmp_path)
    _loaded_after("analyze", "AAPL", env=env, timeout=600)  # migrates, builds the calendar once
    for _ in range(2):  # the session days are kept per day: a run across midnight builds them anew
        day = date.today()
        loaded = _loaded_after("analyze", "AAPL", env=env, timeout=600)
        if date.today() == day:
            break
    assert "agents.quant.risk.engine" in loaded  # the analysis ran its risk forecast
    heavy = ("scipy.signal", "scipy.stats", "scipy.optimize", "exchange_calendars", "sqlalchemy.orm")
    assert sorted(m for m in (*heavy, "litellm", "matplotlib") if m in loaded) == []
