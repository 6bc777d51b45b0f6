"""Rewrite flat settings reads (``settings.llm_model``) to grouped ones (``settings.llm.llm_model``).

Usage::

    uv run python -m core.settings.codemod [--check] [PATH ...]

PATH is a file or a folder (default: the project's code and test folders, :data:`DEFAULT_PATHS`).
``--check`` writes nothing and exits 1 when a file would change. Re-running is harmless: an
access that already names its group (``settings.llm.llm_model``) is left alone, so a second run
changes nothing.

How a receiver is known to be a :class:`core.settings.Settings` (the standard library's
``ast`` gives the nodes and their positions; no type checker runs):

* a call of ``get_settings()``, ``Settings(...)`` or a function of the same module annotated
  ``-> Settings`` (and ``.model_copy``/``.model_validate`` of one);
* a name annotated ``Settings`` (``Settings | None``, ``"Settings"``) as a parameter or variable
  in the enclosing scopes, or assigned from one of the calls above;
* by name: a variable called ``settings``/``_settings``, or an attribute ``.settings`` /
  ``._settings`` (``ctx.settings``, ``self._settings``): the project's convention.

Rewritten: attribute reads and writes whose name is a grouped field or group property
(:func:`core.settings.grouped_attributes`), and ``getattr``/``setattr``/``hasattr``/
``delattr``/``monkeypatch.setattr`` with such a receiver and a literal name. Reported (file,
line, column, and why) and left as they are: a grouped name read from a receiver of unknown
type (``s.llm_model`` where ``s`` came from elsewhere), ``dir(settings)``,
``Settings.model_fields[...]`` with a flat name, and ``settings.<flat name>`` inside a string
(a docstring, or code a test runs in a child process). ``mypy`` then finds any flat read that remains
(``Settings`` has no such attribute). Flat keyword arguments (``Settings(llm_model=...)``) and
flat ``model_copy(update=...)`` keys need no rewrite: ``Settings`` maps them itself.

Edits are insertions at the byte offsets ``ast`` reports (UTF-8 columns), so formatting and
comments stay as they were.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from core.settings import grouped_attributes

#: Folders rewritten when no path is given (relative to the working directory).
DEFAULT_PATHS = ("apps", "pipeline", "tasks", "agents", "db", "core", "tests", "bench")
#: Variable names taken for settings objects by convention.
SETTINGS_NAMES = frozenset({"settings", "_settings"})
#: Calls returning a settings object.
SETTINGS_FACTORIES = frozenset({"get_settings", "Settings"})
#: Methods of a settings object returning another one.
SETTINGS_METHODS = frozenset({"model_copy", "model_validate"})
#: Calls taking (object, "attribute name", ...): the receiver gains its group.
ATTRIBUTE_CALLS = frozenset({"getattr", "setattr", "hasattr", "delattr"})
#: This package: already grouped, and its own ``self.<field>`` reads are not settings reads.
SKIP_DIR = Path(__file__).resolve().parent


@dataclass
class FileResult:
    """What the codemod did to one file: ``edits`` made, ``unresolved`` reports
    (``"path:line:col: text: why"``)."""

    path: Path
    edits: int = 0
    unresolved: list[str] = field(default_factory=list)


def _annotation_is_settings(node: ast.expr | None) -> bool:
    """Whether an annotation names ``Settings`` (bare, dotted, in a union or as a string)."""
    if node is None:
        return False
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            return _annotation_is_settings(ast.parse(node.value, mode="eval").body)
        except SyntaxError:
            return False
    if isinstance(node, ast.Name):
        return node.id == "Settings"
    if isinstance(node, ast.Attribute):
        return node.attr == "Settings"
    if isinstance(node, ast.BinOp):
        return _annotation_is_settings(node.left) or _annotation_is_settings(node.right)
    if isinstance(node, ast.Subscript):  # Optional[Settings]
        return _annotation_is_settings(node.slice)
    return False


def _callee_name(call: ast.Call) -> str | None:
    """``f`` of ``f(...)`` or ``x.f(...)``; ``None`` for other callees."""
    if isinstance(call.func, ast.Name):
        return call.func.id
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    return None


class _Rewriter(ast.NodeVisitor):
    """Collects insertions (line, byte column, text) and reports for one module."""

    def __init__(self, path: Path, lines: list[bytes]) -> None:
        self.path = path
        self.lines = lines
        self.groups = grouped_attributes()
        self.group_names = frozenset(self.groups.values())
        self.scopes: list[set[str]] = [set()]
        #: ``settings.<flat name>`` written in text (longest names first, whole words).
        self._in_text = re.compile(
            r"\b(settings|get_settings\(\))\.("
            + "|".join(sorted(map(re.escape, self.groups), key=len, reverse=True))
            + r")\b"
        )
        self.inserts: list[tuple[int, int, bytes]] = []
        #: Functions of this module annotated to return ``Settings`` (``def _settings() -> Settings``).
        self.factories: set[str] = set()
        self.unresolved: list[str] = []

    # scopes -------------------------------------------------------------------------------
    def _typed_names(self, body: Iterable[ast.AST], args: ast.arguments | None) -> set[str]:
        names: set[str] = set()
        if args is not None:
            for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
                if arg is not None and _annotation_is_settings(arg.annotation):
                    names.add(arg.arg)
        for stmt in body:
            for node in _walk_scope(stmt):
                if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                    if _annotation_is_settings(node.annotation) or (
                        node.value is not None and self._is_settings(node.value)
                    ):
                        names.add(node.target.id)
                elif isinstance(node, ast.Assign) and self._is_settings(node.value):
                    names.update(t.id for t in node.targets if isinstance(t, ast.Name))
                elif (
                    isinstance(node, ast.withitem)
                    and self._is_settings(node.context_expr)
                    and isinstance(node.optional_vars, ast.Name)
                ):
                    names.add(node.optional_vars.id)
        return names

    def visit_Module(self, node: ast.Module) -> None:
        self.factories = {
            f.name
            for f in ast.walk(node)
            if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef) and _annotation_is_settings(f.returns)
        }
        self.scopes[0] = self._typed_names(node.body, None)
        self.generic_visit(node)

    def _visit_function(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> None:
        body: list[ast.AST] = [node.body] if isinstance(node, ast.Lambda) else list(node.body)
        self.scopes.append(self._typed_names(body, node.args))
        self.generic_visit(node)
        self.scopes.pop()

    visit_FunctionDef = _visit_function
    visit_AsyncFunctionDef = _visit_function
    visit_Lambda = _visit_function

    # receivers ----------------------------------------------------------------------------
    def _is_settings(self, node: ast.expr) -> bool:
        if isinstance(node, ast.Name):
            return node.id in SETTINGS_NAMES or any(node.id in scope for scope in self.scopes)
        if isinstance(node, ast.Attribute):
            return node.attr in SETTINGS_NAMES
        if isinstance(node, ast.Call):
            name = _callee_name(node)
            if name in SETTINGS_FACTORIES or (isinstance(node.func, ast.Name) and name in self.factories):
                return True
            if name in SETTINGS_METHODS and isinstance(node.func, ast.Attribute):
                return self._is_settings(node.func.value) or (
                    isinstance(node.func.value, ast.Name) and node.func.value.id == "Settings"
                )
        return False

    def _already_grouped(self, receiver: ast.expr, name: str) -> bool:
        return isinstance(receiver, ast.Attribute) and receiver.attr == self.groups[name]

    def _where(self, node: ast.AST) -> str:
        line = getattr(node, "lineno", 0)
        col = getattr(node, "col_offset", 0)
        return f"{self.path}:{line}:{col + 1}"

    def _text(self, node: ast.AST) -> str:
        try:
            return ast.unparse(node)
        except Exception:  # pragma: no cover - unparse handles every node ast.parse makes
            return type(node).__name__

    # rewrites -----------------------------------------------------------------------------
    def visit_Attribute(self, node: ast.Attribute) -> None:
        name = node.attr
        group = self.groups.get(name)
        if group is not None and not self._already_grouped(node.value, name):
            if self._is_settings(node.value):
                line = self.lines[node.end_lineno - 1] if node.end_lineno else b""
                start = (node.end_col_offset or 0) - len(name.encode())
                if line[start : start + len(name.encode())] == name.encode():
                    self.inserts.append((node.end_lineno or 0, start, f"{group}.".encode()))
                else:
                    self.unresolved.append(
                        f"{self._where(node)}: {self._text(node)}: attribute not found at its position"
                    )
            elif not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                self.unresolved.append(
                    f"{self._where(node)}: {self._text(node)}: receiver type unknown (group {group})"
                )
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        name = _callee_name(node)
        is_attr_call = name in ATTRIBUTE_CALLS and isinstance(node.func, ast.Name)
        is_patch = name == "setattr" and isinstance(node.func, ast.Attribute)  # monkeypatch
        if (is_attr_call or is_patch) and len(node.args) >= 2:
            receiver, attr = node.args[0], node.args[1]
            if isinstance(attr, ast.Constant) and isinstance(attr.value, str):
                group = self.groups.get(attr.value)
                if group is not None and not self._already_grouped(receiver, attr.value):
                    if self._is_settings(receiver) and receiver.end_lineno is not None:
                        self.inserts.append(
                            (receiver.end_lineno, receiver.end_col_offset or 0, f".{group}".encode())
                        )
                    else:
                        self.unresolved.append(
                            f"{self._where(node)}: {self._text(node)}: receiver type unknown"
                        )
        elif (
            name == "dir"
            and isinstance(node.func, ast.Name)
            and node.args
            and self._is_settings(node.args[0])
        ):
            self.unresolved.append(
                f"{self._where(node)}: {self._text(node)}: lists the groups, not the fields"
            )
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        # A docstring, a comment-like string or code run in a child process (``python -c``):
        # not parsed as code, so only reported.
        if isinstance(node.value, str) and "settings" in node.value:
            for match in self._in_text.finditer(node.value):
                self.unresolved.append(
                    f"{self._where(node)}: {match.group(0)}: inside a string (docstring or code "
                    f"text; group {self.groups[match.group(2)]})"
                )

    def visit_Subscript(self, node: ast.Subscript) -> None:
        value, key = node.value, node.slice
        if (
            isinstance(value, ast.Attribute)
            and value.attr == "model_fields"
            and isinstance(key, ast.Constant)
            and isinstance(key.value, str)
            and key.value in self.groups
        ):
            self.unresolved.append(
                f"{self._where(node)}: {self._text(node)}: a flat field of a grouped model "
                f"(use the {self.groups[key.value]} group's model)"
            )
        self.generic_visit(node)


def _walk_scope(node: ast.AST) -> Iterator[ast.AST]:
    """``ast.walk`` that does not enter nested functions, lambdas or classes (their own scopes)."""
    todo = [node]
    while todo:
        current = todo.pop()
        yield current
        for child in ast.iter_child_nodes(current):
            if not isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
                todo.append(child)


def rewrite_source(source: bytes, path: Path) -> tuple[bytes, FileResult]:
    """The rewritten ``source`` of ``path`` and what was done. Raises ``SyntaxError`` for a
    file ``ast`` cannot parse."""
    tree = ast.parse(source, filename=str(path))
    lines = source.splitlines(keepends=True)
    rewriter = _Rewriter(path, lines)
    rewriter.visit(tree)
    for line_no, col, text in sorted(set(rewriter.inserts), reverse=True):
        line = lines[line_no - 1]
        lines[line_no - 1] = line[:col] + text + line[col:]
    result = FileResult(path, edits=len(set(rewriter.inserts)), unresolved=rewriter.unresolved)
    return b"".join(lines), result


def python_files(paths: Iterable[Path]) -> Iterator[Path]:
    """The ``.py`` files under ``paths`` (files given directly included), sorted per folder,
    without this package (:data:`SKIP_DIR`) and virtual environments."""
    for path in paths:
        if path.is_file():
            yield path
            continue
        for file in sorted(path.rglob("*.py")):
            resolved = file.resolve()
            if SKIP_DIR in resolved.parents or ".venv" in file.parts:
                continue
            yield file


def main(argv: list[str] | None = None) -> int:
    """Command line (module docstring). Returns the exit status: 1 with ``--check`` when a file
    would change, or when a file does not parse; else 0."""
    parser = argparse.ArgumentParser(prog="python -m core.settings.codemod", description=__doc__)
    parser.add_argument("paths", nargs="*", type=Path)
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a file would change")
    args = parser.parse_args(argv)
    paths = args.paths or [Path(p) for p in DEFAULT_PATHS if Path(p).exists()]
    status = 0
    total = 0
    unresolved: list[str] = []
    for file in python_files(paths):
        source = file.read_bytes()
        try:
            new, result = rewrite_source(source, file)
        except SyntaxError as exc:
            print(f"{file}: not parsed: {exc}", file=sys.stderr)  # noqa: T201
            status = 1
            continue
        unresolved += result.unresolved
        if new != source:
            total += result.edits
            print(f"{file}: {result.edits} rewritten")  # noqa: T201
            if args.check:
                status = 1
            else:
                file.write_bytes(new)
    for line in unresolved:
        print(f"not rewritten: {line}")  # noqa: T201
    print(f"{total} accesses rewritten, {len(unresolved)} left for a person")  # noqa: T201
    return status


if __name__ == "__main__":
    sys.exit(main())
