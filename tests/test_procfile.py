"""The Procfile's commands run as written from a fresh shell (no activated virtualenv).

``uvx honcho start`` runs each line with ``/bin/sh -c`` in the repository; a line that names
``finagent`` directly fails with ``/bin/sh: 1: finagent: not found`` unless ``.venv`` is
activated, so every command goes through ``uv run``. This test parses the Procfile and runs each
command with ``--help`` appended in an environment without the virtualenv on ``PATH``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: honcho's Procfile grammar (honcho/environ.py ``PROCFILE_LINE``): ``name: command``.
PROCFILE_LINE = re.compile(r"^([A-Za-z0-9_-]+):\s*(.+)$")


def procfile_commands(path: Path) -> dict[str, str]:
    """The ``name: command`` entries of a Procfile (comments and blank lines skipped)."""
    entries: dict[str, str] = {}
    for line in path.read_text().splitlines():
        match = PROCFILE_LINE.match(line)
        if match:
            entries[match.group(1)] = match.group(2).strip()
    return entries


def _fresh_shell_env() -> dict[str, str]:
    """The environment of a new shell: no ``VIRTUAL_ENV`` and no ``.venv/bin`` on ``PATH``."""
    venv_bin = str(ROOT / ".venv" / "bin")
    env = {k: v for k, v in os.environ.items() if k not in {"VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT"}}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p and p != venv_bin)
    return env


def test_procfile_lists_the_service_processes() -> None:
    assert set(procfile_commands(ROOT / "Procfile")) == {"worker", "beat", "sweeper", "flower", "api"}


@pytest.mark.parametrize("name", ["worker", "beat", "sweeper", "flower", "api"])
def test_procfile_command_runs_without_an_activated_venv(name: str) -> None:
    env = _fresh_shell_env()
    if shutil.which("uv", path=env["PATH"]) is None:
        pytest.skip("uv is not on PATH (README installs it with `python3 -m pip install uv`)")
    command = procfile_commands(ROOT / "Procfile")[name]
    # given the command as honcho runs it (sh -c, repository as cwd), when asked for --help
    proc = subprocess.run(
        ["/bin/sh", "-c", f"{command} --help"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    # then it starts and prints its usage (rc 127 "not found" was the failure before)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Usage: finagent" in proc.stdout
