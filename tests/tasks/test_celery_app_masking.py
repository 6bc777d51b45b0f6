"""What travels through the broker carries no configured secret: the ``json`` serializer the
Celery app registers masks task messages, events and results (``tasks.app.masked_json_dumps``),
and a publish's ``argsrepr``/``kwargsrepr`` headers are masked.

Bodies are published and received again on the app's own connection to kombu's in-memory
transport (``app.connection_for_write``), so what is checked is the payload a broker holds and
what any consumer decodes from it."""

from __future__ import annotations

import json
import uuid
from typing import Any

from tasks.app import _short_argsrepr, app
from tests.support.secrets import ECHO, KEY


def _through_a_broker(body: Any, serializer: str) -> tuple[str, str, str, Any]:
    """``body`` published with ``serializer`` on the app's connection to the in-memory transport
    and received again: the payload as the broker held it (text), its content type and encoding,
    and what a consumer decodes."""
    with app.connection_for_write("memory://") as conn:
        queue = conn.SimpleQueue(f"masking-{uuid.uuid4().hex[:8]}")
        try:
            queue.put(body, serializer=serializer)
            message = queue.get(timeout=5)
            message.ack()
            return message.body.decode(), message.content_type, message.content_encoding, message.decode()
        finally:
            queue.close()


def test_a_task_message_body_is_masked_and_still_kombus_json(secret: str) -> None:
    # protocol 2 body: (args, kwargs, embed); the state and the rows a retry carries
    state = {"analysis_id": "a1", "errors": [{"message": ECHO}], "volume": 12345678}
    body = ((state,), {"pending_rows": [{"error": ECHO}]}, {"callbacks": None})
    payload, content_type, encoding, (args, kwargs, _) = _through_a_broker(body, app.conf.task_serializer)
    assert (content_type, encoding) == ("application/json", "utf-8")
    assert secret not in payload
    assert args[0]["errors"][0]["message"] == "Incorrect API key provided: ***"
    assert (
        args[0]["volume"] == 12345678
        and kwargs["pending_rows"][0]["error"] == "Incorrect API key provided: ***"
    )


def test_events_and_results_use_the_same_masking_encoder(secret: str) -> None:
    assert app.conf.event_serializer == app.conf.result_serializer == "json"
    event = {"type": "task-failed", "exception": f"TransientStageError('{ECHO}')", "traceback": ECHO}
    payload, _, _, _ = _through_a_broker(event, app.conf.event_serializer)
    assert secret not in payload and json.loads(payload)["traceback"] == "Incorrect API key provided: ***"


def test_without_a_secret_the_body_is_encoded_as_kombu_does(clean_settings: None) -> None:
    body: tuple[Any, ...] = (({"x": ECHO},), {}, {})
    payload, _, _, decoded = _through_a_broker(body, app.conf.task_serializer)
    # kombu's own JSON encoder writes plain values as the standard library's does: not a byte
    # of the wire format changes when there is nothing to mask
    assert payload == json.dumps(body)
    assert decoded == [[{"x": ECHO}], {}, {}]


def test_argsrepr_headers_of_any_task_are_masked(secret: str) -> None:
    headers = {"argsrepr": f"('run-1', '{ECHO}')", "kwargsrepr": f"{{'note': '{KEY}'}}"}
    _short_argsrepr(sender="finagent.watchlists.finalize", body=(("run-1",), {}, {}), headers=headers)
    assert headers == {
        "argsrepr": "('run-1', 'Incorrect API key provided: ***')",
        "kwargsrepr": "{'note': '***'}",
    }
