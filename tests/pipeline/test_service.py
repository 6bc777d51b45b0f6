"""The Python producer API in embedded mode: ``from pipeline import enqueue_analysis``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pipeline.service import InvalidRequestError


@pytest.fixture
def embedded(clean_settings: None) -> Iterator[None]:
    """Embedded settings; the process-wide in-process worker is stopped afterwards."""
    from pipeline.producer import stop_embedded_worker

    yield
    stop_embedded_worker()


@pytest.mark.usefixtures("embedded")
def test_enqueue_analysis_handle_and_session_follow_up() -> None:
    from datetime import date

    from pipeline import enqueue_analysis

    handle = enqueue_analysis(
        "ibm",
        as_of=date(2012, 6, 29),
        analysis_type="technical",
        options={"max_iterations": 2},
        session_id="s",
    )
    assert handle.symbol == "IBM" and len(handle.id) == 36
    assert handle.status() in {"queued", "researching", "analyzing", "recommending", "reviewing", "done"}
    row = handle.wait(timeout=120)
    assert row["status"] == "done" and row["report"].startswith("# IBM") and row["max_iterations"] == 2

    follow = enqueue_analysis(query="and what about MSFT?", session_id="s")
    assert (follow.symbol, follow.analysis_type, follow.as_of) == ("MSFT", "technical", date(2012, 6, 29))
    assert follow.wait(timeout=120)["max_iterations"] == 2

    with pytest.raises(InvalidRequestError, match="AAPL1"):
        enqueue_analysis("AAPL1")


def test_unknown_symbol_error_names_the_symbol_once() -> None:
    from agents.providers.embedded import EmbeddedProvider
    from pipeline.service import resolve_as_of

    with pytest.raises(InvalidRequestError) as info:
        resolve_as_of(provider=EmbeddedProvider(), symbol="ZZZZZ", as_of=None)
    assert str(info.value).startswith("ZZZZZ: not in the embedded dataset")
    assert str(info.value).count("ZZZZZ") == 1
