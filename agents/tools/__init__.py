"""Tools: pydantic input → envelope output, one ``tool_calls`` row per attempt (seed 002).

Import :mod:`agents.tools.registry` for ``run_tool`` and the registry; importing this package
alone stays cheap (no pandas).
"""
