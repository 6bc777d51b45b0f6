"""The OpenAPI document is a contract: clients generate code from it (operationIds, parameter
names and patterns, response codes), so a refactoring of the routes must leave it as it is.

``snapshots/openapi.json`` is the document of the gateway as committed before its routes were
split into one router per resource. A deliberate API change updates it in the same commit::

    uv run python -c "import json, tasks; from apps.api.app import create_app; \\
    print(json.dumps(create_app().openapi(), indent=2, ensure_ascii=False))" \\
    > tests/apps/api/snapshots/openapi.json
"""

from __future__ import annotations

import json
from pathlib import Path

from apps.api.app import create_app
from core.settings import Settings

SNAPSHOT = Path(__file__).parent / "snapshots" / "openapi.json"


def _document(tmp_path: Path, **overrides: object) -> dict[str, object]:
    settings = Settings(
        service_database_url=f"sqlite:///{tmp_path / 'api.sqlite3'}", service_state_dir=tmp_path, **overrides
    )
    document: dict[str, object] = create_app(settings).openapi()
    return document


def test_the_openapi_document_matches_the_snapshot(tmp_path: Path) -> None:
    """Equal as text (key order included: it orders the paths in ``/docs``), so every path,
    method, operationId, parameter, schema and documented response is as committed."""
    expected = SNAPSHOT.read_text(encoding="utf-8")
    actual = json.dumps(_document(tmp_path), indent=2, ensure_ascii=False) + "\n"
    assert actual == expected


def test_every_operation_id_is_unique_and_named_after_its_handler(tmp_path: Path) -> None:
    """FastAPI derives an operationId from the handler's name, path and method: a handler
    renamed while moving it to another module would change the id generated clients call."""
    snapshot = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    expected = {
        (path, method): operation["operationId"]
        for path, item in snapshot["paths"].items()
        for method, operation in item.items()
    }
    document = _document(tmp_path)
    paths = document["paths"]
    assert isinstance(paths, dict)
    actual = {
        (path, method): operation["operationId"]
        for path, item in paths.items()
        for method, operation in item.items()
    }
    assert actual == expected
    assert len(set(actual.values())) == len(actual)
    assert actual[("/analyze", "post")] == "analyze_analyze_post"
    assert (
        actual[("/analyses/{analysis_id}/chart.png", "get")]
        == "get_chart_analyses__analysis_id__chart_png_get"
    )
