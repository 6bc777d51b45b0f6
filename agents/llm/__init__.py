"""LLM agents through LiteLLM (docs/design.md, "LLM agents"): configuration, the call session with its
``llm_calls`` rows and budget, the agentic loop and structured-answer parsing.

Importing this package never imports ``litellm`` (about 4 s): only a session's first call does,
so the deterministic path (no model configured) stays as fast as before.
"""
