"""The catalog of built-in tools: the one module that imports every tool module.

Importing a tool module registers its tools in :data:`agents.tools.registry.REGISTRY`. The
registry imports no tool (tools import it), so whoever runs tools by name goes through here:
:func:`load_builtin_tools`, or :func:`get_tool` / :func:`run_tool`, which load them first.

The tool modules are imported inside :func:`load_builtin_tools`, not at the top: the CLI imports
this module on every start but only ``finagent tool`` and the stages need the tools (pandas and
numpy come with them); a test keeps heavy optional libraries out of that load as well.
"""

from __future__ import annotations

from typing import Any

from agents.tools import registry
from agents.tools.envelope import ToolEnvelope
from agents.tools.registry import Tool, ToolContext


def load_builtin_tools() -> None:
    """Import the modules that register the built-in tools (idempotent; the imports are cached
    by Python after the first call)."""
    # Lazy on purpose (module docstring: cold start of the CLI).
    from agents.tools import (  # noqa: F401
        alpaca_price,  # get_stock_price
        calculator,
        chart,
        earnings,
        events,
        fundamentals,
        market,
        news,
        options,  # get_option_chain, filter_options ...
        portfolio,
        quotes,
        sandbox,
        social,  # get_social_posts
        technical,
        trading,
    )


def get_tool(name: str) -> Tool:
    """The built-in or registered tool ``name`` (:func:`agents.tools.registry.get_tool` after
    :func:`load_builtin_tools`). Raises KeyError naming the known tools."""
    load_builtin_tools()
    return registry.get_tool(name)


def run_tool(*, name: str, arguments: dict[str, Any], ctx: ToolContext) -> ToolEnvelope:
    """:func:`agents.tools.registry.run_tool` after :func:`load_builtin_tools`: what the stages,
    the CLI and the LLM loop call to run a tool by name. Never raises for tool failures (they
    become error envelopes); raises KeyError for an unknown ``name``."""
    load_builtin_tools()
    return registry.run_tool(name=name, arguments=arguments, ctx=ctx)
