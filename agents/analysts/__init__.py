"""Analysts (docs/design.md, "Analyst graph"): pydantic result models, deterministic
implementations, and the LiteLLM tool-calling implementations with context passing, synthesis
and grounding correction.
"""
