"""What travels through the broker carries no configured secret: kombu's ``json`` encoder masks
task messages, events and results (``tasks.app.masked_json_dumps``), and a publish's
``argsrepr``/``kwargsrepr`` headers are masked."""

from __future__ import annotations

import json

from kombu.serialization import dumps, loads

from tasks.app import _short_argsrepr, app
from tests.support.secrets import ECHO, KEY


def test_a_task_message_body_is_masked_and_still_kombus_json(secret: str) -> None:
    # protocol 2 body: (args, kwargs, embed); the state and the rows a retry carries
    state = {"analysis_id": "a1", "errors": [{"message": ECHO}], "volume": 12345678}
    body = ((state,), {"pending_rows": [{"error": ECHO}]}, {"callbacks": None})
    content_type, encoding, payload = dumps(body, serializer=app.conf.task_serializer)
    assert (content_type, encoding) == ("application/json", "utf-8")
    assert secret not in payload
    args, kwargs, _ = loads(payload, content_type, encoding)
    assert args[0]["errors"][0]["message"] == "Incorrect API key provided: ***"
    assert (
        args[0]["volume"] == 12345678
        and kwargs["pending_rows"][0]["error"] == "Incorrect API key provided: ***"
    )


def test_events_and_results_use_the_same_masking_encoder(secret: str) -> None:
    assert app.conf.event_serializer == app.conf.result_serializer == "json"
    event = {"type": "task-failed", "exception": f"TransientStageError('{ECHO}')", "traceback": ECHO}
    _, _, payload = dumps(event, serializer="json")
    assert secret not in payload and json.loads(payload)["traceback"] == "Incorrect API key provided: ***"


def test_without_a_secret_the_body_is_encoded_as_kombu_does(clean_settings: None) -> None:
    from kombu.utils.json import dumps as kombu_dumps

    body = (({"x": ECHO},), {}, {})
    assert dumps(body, serializer="json")[2] == kombu_dumps(body)


def test_argsrepr_headers_of_any_task_are_masked(secret: str) -> None:
    headers = {"argsrepr": f"('run-1', '{ECHO}')", "kwargsrepr": f"{{'note': '{KEY}'}}"}
    _short_argsrepr(sender="finagent.watchlists.finalize", body=(("run-1",), {}, {}), headers=headers)
    assert headers == {
        "argsrepr": "('run-1', 'Incorrect API key provided: ***')",
        "kwargsrepr": "{'note': '***'}",
    }
