"""Size limits of the source tree: no function over 100 lines, no module over 800.

Every non-test ``.py`` file under ``agents/``, ``apps/``, ``core/``, ``db/``, ``pipeline/`` and ``tasks/`` is
measured: a module by its lines, a function (or method, nested ones too) from its ``def`` line
to its last line, decorators not counted. The code written before the limits keeps its
offenders in :data:`FILES_OVER` and :data:`FUNCTIONS_OVER` with their sizes when listed: the
test fails when a new offender appears, when a listed one grows, and when a listed one is no
longer over its limit or no longer exists (remove its entry: the lists only shrink).
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import REPO_ROOT

MAX_FILE_LINES = 800
MAX_FUNCTION_LINES = 100
PACKAGES = ("agents", "apps", "core", "db", "pipeline", "tasks")

#: Modules over :data:`MAX_FILE_LINES`, by path: their line count when listed (never higher).
FILES_OVER: dict[str, int] = {}

#: Functions over :data:`MAX_FUNCTION_LINES`, by ``path:qualified name``: their lines when listed.
FUNCTIONS_OVER: dict[str, int] = {}


def _sources(root: Path) -> list[Path]:
    return sorted(p for package in PACKAGES for p in (root / package).rglob("*.py"))


def function_sizes(source: str) -> dict[str, int]:
    """``{qualified name: lines}`` of every function and method in ``source`` (Python text),
    nested ones under their parent's name (``Outer.inner``); a name defined twice keeps its
    longest. Lines run from the ``def`` line to the last line (decorators not counted)."""
    sizes: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    lines = (child.end_lineno or child.lineno) - child.lineno + 1
                    sizes[name] = max(lines, sizes.get(name, 0))
                visit(child, f"{name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return sizes


def measure(root: Path) -> tuple[dict[str, int], dict[str, int]]:
    """The offenders under ``root``: ``({path: lines} of modules over MAX_FILE_LINES,
    {"path:qualified name": lines} of functions over MAX_FUNCTION_LINES)``."""
    files: dict[str, int] = {}
    functions: dict[str, int] = {}
    for path in _sources(root):
        rel = path.relative_to(root).as_posix()
        source = path.read_text(encoding="utf-8")
        lines = len(source.splitlines())
        if lines > MAX_FILE_LINES:
            files[rel] = lines
        for name, size in function_sizes(source).items():
            if size > MAX_FUNCTION_LINES:
                functions[f"{rel}:{name}"] = size
    return files, functions


def _problems(found: dict[str, int], allowed: dict[str, int], limit: int) -> list[str]:
    new = [f"{k}: {v} lines (limit {limit})" for k, v in sorted(found.items()) if k not in allowed]
    grown = [
        f"{k}: {v} lines, listed at {allowed[k]}" for k, v in sorted(found.items()) if v > allowed.get(k, v)
    ]
    gone = [f"{k}: no longer over {limit}; remove its entry" for k in sorted(allowed) if k not in found]
    return new + grown + gone


def test_no_module_is_over_its_limit_beyond_the_listed_ones() -> None:
    files, _ = measure(REPO_ROOT)
    assert _problems(files, FILES_OVER, MAX_FILE_LINES) == []


def test_no_function_is_over_its_limit_beyond_the_listed_ones() -> None:
    _, functions = measure(REPO_ROOT)
    assert _problems(functions, FUNCTIONS_OVER, MAX_FUNCTION_LINES) == []


def test_the_measure_counts_nested_functions_and_methods(tmp_path: Path) -> None:
    body = "\n".join(f"        x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    (tmp_path / "core").mkdir()
    (tmp_path / "core" / "big.py").write_text(
        "class A:\n    def ok(self):\n        return 1\n\n    @property\n    def long(self):\n"
        + "\n".join(f"        y{i} = {i}" for i in range(MAX_FUNCTION_LINES))
        + f"\n\n\ndef outer():\n    def inner():\n{body}\n    return inner\n",
        encoding="utf-8",
    )
    (tmp_path / "core" / "long.py").write_text("x = 1\n" * (MAX_FILE_LINES + 1), encoding="utf-8")
    files, functions = measure(tmp_path)
    # a method's def line plus 100 body lines; ``inner``: def + 100; ``outer``: def + inner + return
    assert functions == {
        "core/big.py:A.long": MAX_FUNCTION_LINES + 1,
        "core/big.py:outer": MAX_FUNCTION_LINES + 3,
        "core/big.py:outer.inner": MAX_FUNCTION_LINES + 1,
    }
    assert files == {"core/long.py": MAX_FILE_LINES + 1}
    assert _problems(files, {"core/long.py": MAX_FILE_LINES}, MAX_FILE_LINES) == [
        f"core/long.py: {MAX_FILE_LINES + 1} lines, listed at {MAX_FILE_LINES}"
    ]
    assert _problems({}, {"core/gone.py": 900}, MAX_FILE_LINES) == [
        f"core/gone.py: no longer over {MAX_FILE_LINES}; remove its entry"
    ]
