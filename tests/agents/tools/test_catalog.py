"""The tool catalog and the one-way structure of ``agents.tools``.

``agents.tools.catalog`` is the only module that imports the tool modules; the registry and the
shared helper modules (bars, history, fields, paper_account, envelope) import none, no tool
imports another, and the data providers import no tool code. Checked on the source (``ast``),
so a lazy import inside a function counts too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import agents.tools
from agents.tools.catalog import load_builtin_tools
from agents.tools.registry import REGISTRY

TOOLS_DIR = Path(agents.tools.__file__).parent
PROVIDERS_DIR = TOOLS_DIR.parent / "providers"
#: Modules under agents/tools that register tools (imported by the catalog only).
TOOL_MODULES = {
    "alpaca_price",
    "calculator",
    "chart",
    "earnings",
    "events",
    "fundamentals",
    "market",
    "news",
    "portfolio",
    "quotes",
    "sandbox",
    "technical",
    "trading",
}


def _imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports (``from agents.tools import x`` counts as ``agents.tools.x``)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def test_only_the_catalog_imports_tool_modules() -> None:
    tool_names = {f"agents.tools.{name}" for name in TOOL_MODULES}
    for path in sorted(TOOLS_DIR.glob("*.py")):
        if path.stem == "catalog":
            continue
        assert not (_imported_modules(path) & tool_names), f"{path.name} imports a tool module"


def test_providers_import_no_tool_code() -> None:
    for path in sorted(PROVIDERS_DIR.glob("*.py")):
        tools = {m for m in _imported_modules(path) if m.startswith("agents.tools")}
        assert not tools, f"{path.name} imports {sorted(tools)}"


def test_the_catalog_registers_every_tool_module() -> None:
    load_builtin_tools()
    modules = {tool.func.__module__.rsplit(".", 1)[-1] for tool in REGISTRY.values()}
    assert TOOL_MODULES <= modules
    assert "get_stock_price" in REGISTRY and REGISTRY["get_stock_price"].func.__module__ == (
        "agents.tools.alpaca_price"
    )


def test_registering_every_tool_imports_no_heavy_optional_library() -> None:
    # Every worker and CLI process registers all tools; libraries only some tools use must stay
    # lazy (empyrical drags in scipy and yfinance: ~1.5 s of a 3 s cold start, measured).
    import subprocess
    import sys

    code = (
        "import sys; from agents.tools.catalog import load_builtin_tools; load_builtin_tools(); "
        "heavy = ('empyrical', 'scipy', 'yfinance', 'litellm', 'mplfinance'); "
        "print(sorted(m for m in heavy if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "[]"


def test_the_table_of_builtin_tools_names_where_each_tool_registers() -> None:
    """``catalog.BUILTIN_TOOLS`` (what ``load_tool`` imports) is the registry's own answer, and
    each summary is one short line."""
    from agents.tools.catalog import BUILTIN_TOOLS

    load_builtin_tools()
    registered = {
        n: t.func.__module__ for n, t in REGISTRY.items() if t.func.__module__.startswith("agents.tools.")
    }
    assert registered == {name: entry.module for name, entry in BUILTIN_TOOLS.items()}
    assert all(0 < len(entry.summary) <= 50 and "\n" not in entry.summary for entry in BUILTIN_TOOLS.values())


def test_each_tool_module_is_imported_in_code_never_by_a_built_name() -> None:
    """``load_tool`` imports a tool's module with a static import of its own (every module of
    ``BUILTIN_TOOLS`` has one), so lint-imports sees the edge; an unknown module is refused."""
    import inspect

    from agents.tools import catalog

    source = inspect.getsource(catalog)
    assert "importlib" not in source and "__import__" not in source
    for module in {entry.module for entry in catalog.BUILTIN_TOOLS.values()}:
        catalog._import_module(module)
        assert f"from agents.tools import {module.rsplit('.', 1)[1]}  # noqa: F401" in source
    with pytest.raises(KeyError, match="no built-in tool module"):
        catalog._import_module("agents.tools.registry")


def test_loading_one_tool_imports_its_module_alone() -> None:
    """``load_tool("get_stock_data")`` registers the market tools, not the chart, option or
    indicator ones (and none of their libraries); an unknown name lists every tool."""
    import subprocess
    import sys

    code = (
        "import sys; from agents.tools.catalog import load_tool; from agents.tools.registry import REGISTRY; "
        "load_tool('get_stock_data'); "
        "print(sorted(REGISTRY)); print(sorted(m for m in ('matplotlib', 'pandas_ta', 'numba', "
        "'agents.tools.chart', 'agents.tools.options') if m in sys.modules)); "
        "\ntry:\n    load_tool('no_such_tool')\n"
        "except KeyError as exc:\n    print('render_chart' in str(exc))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    registered, heavy, listed = out.stdout.splitlines()
    assert registered == "['get_history', 'get_stock_data']"
    assert heavy == "[]"
    assert listed == "True"
