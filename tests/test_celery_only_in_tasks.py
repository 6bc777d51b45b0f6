"""Celery and kombu are imported only in ``tasks/``, the adapter layer.

The import-linter contract (``pyproject.toml``) holds the product packages to it, function-level
imports included, but sees only those packages. This test holds every other tracked Python
file (the tests, the benchmarks, the scripts) to the same rule at module level: the check
``git grep -lE "^(from|import) (celery|kombu)"`` lists only files under ``tasks/``, here made
with ``ast`` so that an import under an ``if`` or a ``try`` at the top of a module counts and
text inside a string does not. Tests reach Celery through what ``tasks/`` offers: the app
(``tasks.app.app``: its connections, producers and the serializer it registers), its publish
helpers (``send_chains``, the ``pipeline.taskqueue`` port) and the adapter's names
(``tasks.base.Ignore``, ``tasks.base.Retry``).
"""

from __future__ import annotations

import ast
import subprocess
from collections.abc import Iterator

from tests.conftest import REPO_ROOT

#: The packages only ``tasks/`` may import.
FORBIDDEN = frozenset({"celery", "kombu"})
#: Where they may be imported (a path prefix, relative to the repository).
ADAPTER = "tasks/"


def module_level_imports(source: str) -> Iterator[tuple[int, str]]:
    """``(line, module)`` of every import in ``source`` (Python text) that runs when the module
    is imported: at the top, in an ``if``/``try``/``with`` block or a class body there, but not
    inside a function (nor a lambda). ``module`` is the imported module's full name; a
    relative import is left out (it names the project's own modules)."""

    def visit(node: ast.AST) -> Iterator[tuple[int, str]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                continue
            if isinstance(child, ast.Import):
                yield from ((child.lineno, alias.name) for alias in child.names)
            elif isinstance(child, ast.ImportFrom) and child.level == 0 and child.module:
                yield child.lineno, child.module
            else:
                yield from visit(child)

    yield from visit(ast.parse(source))


def offenders(files: dict[str, str]) -> list[str]:
    """``path:line: module`` of each module-level import of :data:`FORBIDDEN` in ``files``
    (``{path relative to the repository: source}``) outside :data:`ADAPTER`."""
    return [
        f"{path}:{line}: {module}"
        for path, source in sorted(files.items())
        if not path.startswith(ADAPTER)
        for line, module in module_level_imports(source)
        if module.partition(".")[0] in FORBIDDEN
    ]


def _tracked_python_files() -> dict[str, str]:
    """Every ``.py`` file git tracks in the repository, by path: its text."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--", "*.py"], cwd=REPO_ROOT, capture_output=True, check=True, timeout=60
    )
    paths = [p for p in listed.stdout.decode().split("\0") if p]
    return {p: (REPO_ROOT / p).read_text(encoding="utf-8") for p in paths if (REPO_ROOT / p).is_file()}


def test_no_file_outside_tasks_imports_celery_or_kombu_at_module_level() -> None:
    files = _tracked_python_files()
    assert any(p.startswith(ADAPTER) for p in files)  # the listing found the repository's files
    found = offenders(files)
    assert found == [], "Celery/kombu imported outside tasks/ (reach them through tasks.app):\n" + "\n".join(
        found
    )


def test_the_scan_counts_the_imports_that_run_at_import_time_and_nothing_else() -> None:
    source = "\n".join(
        [
            "import kombu",
            "from celery.exceptions import Ignore",
            "try:",
            "    from celery import group",
            "except ImportError:",
            "    pass",
            "if True:",
            "    import kombu.serialization as ser",
            "class Holder:",
            "    from celery import Task",
            "from . import celery",
            "import celeryish",
            "text = '''",
            "from celery import chain",
            "'''",
            "def later():",
            "    from celery import chord",
        ]
    )
    assert offenders({"tests/x.py": source, "tasks/y.py": source}) == [
        "tests/x.py:1: kombu",
        "tests/x.py:2: celery.exceptions",
        "tests/x.py:4: celery",
        "tests/x.py:8: kombu.serialization",
        "tests/x.py:10: celery",
    ]
