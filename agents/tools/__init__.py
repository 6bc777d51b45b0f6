"""Tools: pydantic input → envelope output, one ``tool_calls`` row per attempt
(docs/design.md, "Tool envelope").

One way down: :mod:`agents.tools.catalog` imports the tool modules (one per family: market,
chart, news, ...); each tool imports the shared modules (:mod:`~agents.tools.registry`,
:mod:`~agents.tools.envelope`, :mod:`~agents.tools.fields`, :mod:`~agents.tools.bars`,
:mod:`~agents.tools.history`, :mod:`~agents.tools.paper_account`), which import no tool. Run a
tool by name with ``agents.tools.catalog.run_tool``; importing this package alone stays cheap
(no pandas).
"""
