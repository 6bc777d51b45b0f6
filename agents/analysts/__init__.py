"""Analysts (seeds 003 and 004): pydantic result models, deterministic implementations, and the
LiteLLM tool-calling implementations with context passing, synthesis and grounding correction.
"""
