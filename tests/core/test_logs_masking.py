"""Log records carry no configured secret, whichever logger makes them and whichever handler
writes them (``core.logs``: the record factory, ``SecretFilter``, the JSON formatter)."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from core.logs import SecretFilter, configure_logging, install_log_masking, mask_record
from core.settings import get_settings
from tests.support.secrets import KEY


@pytest.fixture
def secret(clean_settings: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """``FINAGENT_LLM_API_KEY`` set to :data:`KEY`; the record factory restored afterwards."""
    monkeypatch.setenv("FINAGENT_LLM_API_KEY", KEY)
    get_settings.cache_clear()
    factory = logging.getLogRecordFactory()
    yield KEY
    logging.setLogRecordFactory(factory)


def _record(msg: str, *args: object, exc: BaseException | None = None) -> logging.LogRecord:
    exc_info = (type(exc), exc, exc.__traceback__) if exc is not None else None
    return logging.LogRecord("lib", logging.ERROR, __file__, 1, msg, args, exc_info)


def _raised(message: str) -> BaseException:
    try:
        raise RuntimeError(message)
    except RuntimeError as exc:
        return exc


def test_a_record_is_masked_in_its_message_args_traceback_and_payload(secret: str) -> None:
    record = _record(
        "provider said %s", f"Incorrect API key provided: {secret}", exc=_raised(f"key {secret}")
    )
    record.payload = {"error": f"echo {secret}", "n": 1}

    mask_record(record)

    assert record.getMessage() == "provider said Incorrect API key provided: ***"
    assert record.exc_info is None and record.exc_text is not None
    assert "RuntimeError: key ***" in record.exc_text and secret not in record.exc_text
    assert record.payload == {"error": "echo ***", "n": 1}
    text = logging.Formatter().format(record)
    assert secret not in text and "RuntimeError: key ***" in text  # the traceback is still printed


def test_a_record_without_a_secret_is_left_alone(secret: str) -> None:
    error = _raised("nothing to hide")
    record = _record("plain %s", "args", exc=error)
    mask_record(record)
    assert record.msg == "plain %s" and record.args == ("args",) and record.exc_info is not None


def test_every_logger_of_the_process_is_masked_once_installed(secret: str) -> None:
    # a third-party logger with its own plain handler (as LiteLLM, Celery and uvicorn have)
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    other = logging.getLogger("tests.some_library")
    other.addHandler(handler)
    other.propagate = False
    try:
        install_log_masking()
        other.error("AuthenticationError: Incorrect API key provided: %s", secret)
        try:
            raise ValueError(f"echoed {secret}")
        except ValueError:
            other.exception("failed")
    finally:
        other.removeHandler(handler)
    written = stream.getvalue()
    assert secret not in written
    assert "Incorrect API key provided: ***" in written and "ValueError: echoed ***" in written


def test_the_json_lines_of_configure_logging_are_masked(secret: str) -> None:
    stream = io.StringIO()
    root = logging.getLogger("finagent")
    level, propagate = root.level, root.propagate
    configure_logging(stream=stream)
    try:
        log = logging.getLogger("finagent.llm_calls")
        log.error("llm_call", extra={"payload": {"error": f"Incorrect API key provided: {secret}"}})
        logging.getLogger("finagent.tasks").warning("retry: %s", f"echo {secret}")
    finally:
        for h in list(root.handlers):
            if getattr(h, "_finagent", False):
                root.removeHandler(h)
        root.setLevel(level)
        root.propagate = propagate
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert lines[0]["error"] == "Incorrect API key provided: ***"
    assert lines[1]["message"] == "retry: echo ***"
    assert secret not in stream.getvalue()


def test_secret_filter_masks_and_never_drops(secret: str) -> None:
    record = _record("x %s", secret)
    assert SecretFilter().filter(record) is True
    assert record.getMessage() == "x ***"


def test_a_too_short_secret_is_warned_about_on_the_json_stream(
    clean_settings: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FINAGENT_BROKER_ALPACA_API_KEY", "AKq7z")
    get_settings.cache_clear()
    stream = io.StringIO()
    root = logging.getLogger("finagent")
    level, propagate = root.level, root.propagate
    configure_logging(stream=stream)
    try:
        lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    finally:
        for h in list(root.handlers):
            if getattr(h, "_finagent", False):
                root.removeHandler(h)
        root.setLevel(level)
        root.propagate = propagate
    assert [(line["logger"], line["level"]) for line in lines] == [("finagent.secrets", "WARNING")]
    assert "FINAGENT_BROKER_ALPACA_API_KEY" in lines[0]["message"] and "AKq7z" not in lines[0]["message"]
