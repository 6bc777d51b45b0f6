"""finagent's pipeline package. ``from pipeline import enqueue_analysis`` is the Python producer
API (``pipeline.producer``); it is imported lazily so ``import pipeline`` stays cheap (no pandas,
no Celery)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pipeline.producer import AnalysisHandle, enqueue_analysis

__all__ = ["AnalysisHandle", "enqueue_analysis"]


def __getattr__(name: str) -> Any:
    """Load ``enqueue_analysis`` / ``AnalysisHandle`` from ``pipeline.producer`` on first use."""
    if name in __all__:
        from pipeline import producer  # lazy (see module docstring)

        return getattr(producer, name)
    raise AttributeError(f"module 'pipeline' has no attribute {name!r}")
