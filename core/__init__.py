"""The base layer: settings, the pipeline state, ticker rules and structured logs.

Imports nothing of the project (an import-linter contract in ``pyproject.toml`` keeps it so);
``db``, ``agents``, ``pipeline`` and ``tasks`` all build on it.
"""
