"""The catalog of built-in tools: the one module that imports every tool module.

Importing a tool module registers its tools in :data:`agents.tools.registry.REGISTRY`. The
registry imports no tool (tools import it), so whoever runs tools by name goes through here:
:func:`load_builtin_tools`, or :func:`get_tool` / :func:`run_tool`, which load the named tool's module
first.

The tool modules are imported inside :func:`load_builtin_tools`, not at the top: the CLI imports
this module on every start but only ``finagent tool`` and the stages need the tools (pandas and
numpy come with them); a test keeps heavy optional libraries out of that load as well.
:func:`load_tool` imports one tool's module only (:data:`BUILTIN_TOOLS`), so ``finagent tool
get_stock_data`` does not pay for the chart, option and indicator libraries.
"""

from __future__ import annotations

from typing import Any, Final, NamedTuple

from agents.tools import registry
from agents.tools.envelope import ToolEnvelope
from agents.tools.registry import Tool, ToolContext


class BuiltinTool(NamedTuple):
    """Where a built-in tool registers, and what it does in one line (``finagent tool --list``;
    the registered description says the rest)."""

    module: str
    summary: str


#: Every built-in tool: its module and one-line summary (a test checks the names and modules
#: against what :func:`load_builtin_tools` registers).
BUILTIN_TOOLS: Final[dict[str, BuiltinTool]] = {
    "calculate_fib_levels": BuiltinTool(
        "agents.tools.chart", "Fibonacci retracement levels (swing high and low)"
    ),
    "calculate_iv_hv": BuiltinTool(
        "agents.tools.options", "At-the-money IV against historical volatility HV"
    ),
    "calculate_roc": BuiltinTool("agents.tools.options", "Return on capital of selling an option"),
    "calculate_swing_points": BuiltinTool("agents.tools.chart", "Swing highs and lows of a symbol's bars"),
    "calculate_trendline": BuiltinTool("agents.tools.chart", "Least-squares support or resistance trendline"),
    "calculator": BuiltinTool("agents.tools.calculator", "Evaluate an arithmetic expression safely"),
    "filter_calls": BuiltinTool("agents.tools.options", "Covered-call screen of the option chain"),
    "filter_options": BuiltinTool("agents.tools.options", "Cash-secured put screen of the option chain"),
    "financial_news": BuiltinTool("agents.tools.news", "Search news by free text"),
    "find_support_resistance": BuiltinTool(
        "agents.tools.chart", "Support and resistance levels (clustered swings)"
    ),
    "get_corporate_events": BuiltinTool("agents.tools.options", "Coming ex-dividend dates and splits"),
    "get_earnings_dates": BuiltinTool("agents.tools.earnings", "Earnings calendar at the analysis date"),
    "get_fundamentals": BuiltinTool("agents.tools.fundamentals", "Fundamentals known at the analysis date"),
    "get_history": BuiltinTool("agents.tools.market", "Daily OHLCV bars with adjusted close"),
    "get_news": BuiltinTool("agents.tools.news", "Headlines with sentiment and impact"),
    "get_option_chain": BuiltinTool("agents.tools.options", "Option chain quoted on the analysis date"),
    "get_option_context": BuiltinTool(
        "agents.tools.options", "HV cone, IV rank, skew, earnings-implied move"
    ),
    "get_option_greeks": BuiltinTool(
        "agents.tools.options", "IV, greeks, yields, probabilities of contracts"
    ),
    "get_portfolio": BuiltinTool("agents.tools.portfolio", "The paper account's positions and cash"),
    "get_quotes": BuiltinTool("agents.tools.quotes", "Quotes of several symbols as of the analysis date"),
    "get_social_posts": BuiltinTool("agents.tools.social", "Cash-tagged social posts about the symbol"),
    "get_stock_data": BuiltinTool("agents.tools.market", "Latest quote as of the analysis date"),
    "get_stock_price": BuiltinTool("agents.tools.alpaca_price", "Latest trade price from Alpaca (live)"),
    "log_event": BuiltinTool("agents.tools.events", "Record a signal, trade, error or alert event"),
    "render_chart": BuiltinTool("agents.tools.chart", "Candlestick chart (PNG) with levels and trendlines"),
    "risk_forecast": BuiltinTool("agents.tools.risk", "Risk forecast: sigma, VaR, ES and price ranges"),
    "risk_levels": BuiltinTool("agents.tools.risk", "P(close below) and P(touch) of price levels"),
    "run_indicator_script": BuiltinTool("agents.tools.sandbox", "Run a restricted Python indicator script"),
    "technical_indicators": BuiltinTool(
        "agents.tools.technical", "RSI, MACD, Bollinger, SMA, ATR, ADX, OBV and HV"
    ),
    "trade_execute": BuiltinTool("agents.tools.trading", "Execute orders on the paper broker"),
    "trade_simulate": BuiltinTool("agents.tools.trading", "Simulate paper trades with risk metrics"),
}


def _import_module(module: str) -> None:
    """Import the built-in tool module ``module`` (a module of :data:`BUILTIN_TOOLS`), which
    registers its tools: one static import per module, so ``lint-imports`` sees every edge and no
    module is imported by a name built at run time.

    Raises:
        KeyError: ``module`` is no built-in tool module.
    """
    match module:
        case "agents.tools.alpaca_price":
            from agents.tools import alpaca_price  # noqa: F401
        case "agents.tools.calculator":
            from agents.tools import calculator  # noqa: F401
        case "agents.tools.chart":
            from agents.tools import chart  # noqa: F401
        case "agents.tools.earnings":
            from agents.tools import earnings  # noqa: F401
        case "agents.tools.events":
            from agents.tools import events  # noqa: F401
        case "agents.tools.fundamentals":
            from agents.tools import fundamentals  # noqa: F401
        case "agents.tools.market":
            from agents.tools import market  # noqa: F401
        case "agents.tools.news":
            from agents.tools import news  # noqa: F401
        case "agents.tools.options":
            from agents.tools import options  # noqa: F401
        case "agents.tools.portfolio":
            from agents.tools import portfolio  # noqa: F401
        case "agents.tools.quotes":
            from agents.tools import quotes  # noqa: F401
        case "agents.tools.risk":
            from agents.tools import risk  # noqa: F401
        case "agents.tools.sandbox":
            from agents.tools import sandbox  # noqa: F401
        case "agents.tools.social":
            from agents.tools import social  # noqa: F401
        case "agents.tools.technical":
            from agents.tools import technical  # noqa: F401
        case "agents.tools.trading":
            from agents.tools import trading  # noqa: F401
        case _:
            raise KeyError(f"{module!r} is no built-in tool module")


def load_tool(name: str) -> Tool:
    """The tool ``name``, registering it by importing its module alone when it is a built-in
    one (:data:`BUILTIN_TOOLS`); any other name loads every built-in tool first, so a tool
    registered elsewhere is found and an unknown name's error lists them all.

    Raises:
        KeyError: no such tool (the message names the known ones).
    """
    builtin = BUILTIN_TOOLS.get(name)
    if builtin is None:
        load_builtin_tools()
    else:
        _import_module(builtin.module)
    return registry.get_tool(name)


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
        risk,  # risk_forecast, risk_levels
        sandbox,
        social,  # get_social_posts
        technical,
        trading,
    )


def get_tool(name: str) -> Tool:
    """The built-in or registered tool ``name`` (:func:`load_tool`). Raises KeyError naming the
    known tools."""
    return load_tool(name)


def run_tool(*, name: str, arguments: dict[str, Any], ctx: ToolContext) -> ToolEnvelope:
    """:func:`agents.tools.registry.run_tool` after :func:`load_tool`: what the stages, the CLI
    and the LLM loop call to run a tool by name (a stage thus imports the modules of the tools
    it runs, not every tool's: the broker's HTTP client, charts and option pricing stay out of
    an analysis that never calls them). Never raises for tool failures (they become error
    envelopes); raises KeyError for an unknown ``name``."""
    load_tool(name)
    return registry.run_tool(name=name, arguments=arguments, ctx=ctx)
