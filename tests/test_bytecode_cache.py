"""The suite keeps bytecode in a folder of its own where the shell turns it off
(``tests.support.bytecode``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.bytecode import bytecode_prefix, keep_bytecode


def test_the_prefix_is_used_only_where_bytecode_is_off_and_no_prefix_is_named(tmp_path: Path) -> None:
    assert bytecode_prefix({"PYTHONDONTWRITEBYTECODE": "1"}, tmp_path) == tmp_path
    assert bytecode_prefix({}, tmp_path) is None
    assert bytecode_prefix({"PYTHONDONTWRITEBYTECODE": ""}, tmp_path) is None  # empty: not set
    named = {"PYTHONDONTWRITEBYTECODE": "1", "PYTHONPYCACHEPREFIX": "/elsewhere"}
    assert bytecode_prefix(named, tmp_path) is None


def test_an_environment_without_bytecode_is_given_the_prefix_and_left_alone_otherwise(tmp_path: Path) -> None:
    env = {"PYTHONDONTWRITEBYTECODE": "1", "PATH": "/bin"}
    assert keep_bytecode(tmp_path, env) == tmp_path
    assert env == {"PATH": "/bin", "PYTHONPYCACHEPREFIX": str(tmp_path)}
    again = dict(env)
    assert keep_bytecode(tmp_path / "other", again) is None  # a prefix is named now
    assert again == env


def test_a_child_process_writes_its_bytecode_in_the_prefix_tree_not_beside_the_source(tmp_path: Path) -> None:
    source = tmp_path / "src"
    source.mkdir()
    (source / "probe_module.py").write_text("VALUE = 41 + 1\n", encoding="utf-8")
    env = {"PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"}
    keep_bytecode(tmp_path / "prefix", env)
    proc = subprocess.run(
        [sys.executable, "-c", "import probe_module; print(probe_module.VALUE)"],
        cwd=source, env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 0 and proc.stdout.strip() == "42", proc.stderr
    written = list((tmp_path / "prefix").rglob("probe_module.*.pyc"))
    assert len(written) == 1, written
    assert not (source / "__pycache__").exists()
