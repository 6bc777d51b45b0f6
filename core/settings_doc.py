"""``docs/configuration.md``, generated from :class:`core.settings.Settings`.

Regenerate after changing a setting (a test fails while the file and the code differ)::

    uv run python -m core.settings_doc > docs/configuration.md

One row per setting: its environment name (``FINAGENT_`` + the field name in upper case, as
pydantic-settings reads it), its default and its description (units are in the description).
"""

from __future__ import annotations

from pydantic import SecretStr
from pydantic_core import PydanticUndefined

from core.settings import Settings

HEADER = """# Configuration

Every setting is an environment variable (or a line of `.env` in the working directory).
Generated from `core/settings.py` by `uv run python -m core.settings_doc > docs/configuration.md`;
a test fails when this file and the code differ.

| variable | default | meaning |
|---|---|---|
"""


def _default(field_default: object, factory: object) -> str:
    if factory is not None:
        return "(computed)"
    if field_default is PydanticUndefined or field_default is None:
        return "unset"
    if isinstance(field_default, SecretStr):
        return "unset" if not field_default.get_secret_value() else "(secret)"
    text = str(getattr(field_default, "value", field_default))
    return f"`{text}`" if text else "empty"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def render() -> str:
    """The Markdown of docs/configuration.md (a table of every setting). Raises nothing."""
    rows = []
    for name, field in sorted(Settings.model_fields.items()):
        default = _default(field.default, field.default_factory)
        meaning = _cell(field.description or "")
        rows.append(f"| `FINAGENT_{name.upper()}` | {_cell(default)} | {meaning} |")
    return HEADER + "\n".join(rows) + "\n"


if __name__ == "__main__":
    print(render(), end="")  # noqa: T201
