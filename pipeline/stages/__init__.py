"""The pipeline stages as plain typed functions ``(*, state, ctx) -> state`` (no Celery here).

research → analysis → recommendation → review; ``pipeline.rules.should_continue`` decides what
follows. Celery adapters live in ``tasks/``.
"""
