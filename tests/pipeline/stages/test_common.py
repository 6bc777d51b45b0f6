"""A transient stage error survives Celery's JSON exception round trip with its code."""

from __future__ import annotations

from core.settings import Settings
from pipeline.steps.backoff import TransientStageError
from tasks.app import create_app


def test_transient_error_is_rebuilt_with_its_code_by_the_result_backend() -> None:
    backend = create_app(Settings(service_broker_url="redis://127.0.0.1:6379/9")).backend
    sent = TransientStageError("get_stock_data: rate limited, retry in 5 s", code="RATE_LIMITED")
    stored = backend.prepare_exception(sent)
    rebuilt = backend.exception_to_python(stored)
    assert type(rebuilt) is TransientStageError
    assert rebuilt.code == "RATE_LIMITED"
    assert rebuilt.message == "get_stock_data: rate limited, retry in 5 s"
    assert str(rebuilt) == "RATE_LIMITED: get_stock_data: rate limited, retry in 5 s"
