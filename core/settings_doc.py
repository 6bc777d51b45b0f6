"""``docs/configuration.md``, generated from :class:`core.settings.Settings`.

Regenerate after changing a setting (a test fails while the file and the code differ)::

    uv run python -m core.settings_doc > docs/configuration.md

One table per settings group (``Settings.service``, ``Settings.llm``, … in the order of
:data:`core.settings.GROUPS`), one row per setting: its environment name (``FINAGENT_<GROUP>_<FIELD>``,
:func:`core.settings.env_name`), its default, its unit (the field's
``json_schema_extra["unit"]``; ``—`` for none) and its description; then the table of old names
still read (:data:`core.settings.legacy.OLD_NAMES`).
"""

from __future__ import annotations

import inspect

from pydantic import SecretStr
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from core.settings import DEFAULT_STATE_DIR, GROUPS, env_name
from core.settings.legacy import OLD_NAMES

HEADER = """# Configuration

Every setting is an environment variable (or a line of `.env` in the working directory).
Generated from the group models of `core/settings/` by
`uv run python -m core.settings_doc > docs/configuration.md`; a test fails when this file and the
code differ. Code reads a setting through its group: `FINAGENT_LLM_MODEL` is
`settings.llm.model`, `FINAGENT_DURABILITY_TASK_TIME_LIMIT` is `settings.durability.task_time_limit`.
"""

TABLE_HEAD = "| variable | default | unit | meaning |\n|---|---|---|---|\n"

OLD_HEAD = """
## Old names

Still read (environment, `.env`, keyword arguments in lower case), each with one warning per
process naming old -> new; a new name given as well wins. Names that did not change are not listed.

| old | new |
|---|---|
"""


def _default(field_default: object, factory: object) -> str:
    if factory is not None:
        return "(computed)"
    if field_default == DEFAULT_STATE_DIR:  # depends on the machine: say how it is found
        return "`$XDG_STATE_HOME/finagent` (`~/.local/state/finagent`)"
    if field_default is PydanticUndefined or field_default is None:
        return "unset"
    if isinstance(field_default, SecretStr):
        return "unset" if not field_default.get_secret_value() else "(secret)"
    text = str(getattr(field_default, "value", field_default))
    return f"`{text}`" if text else "empty"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def unit_of(field: FieldInfo) -> str:
    """The unit a field declares in ``json_schema_extra={"unit": ...}`` (``"s"``, ``"USD"``,
    ``"fraction"``, …), or ``""`` when it has none."""
    extra = field.json_schema_extra
    unit = extra.get("unit") if isinstance(extra, dict) else None
    return unit if isinstance(unit, str) else ""


def render() -> str:
    """The Markdown of docs/configuration.md: a section per group with a table of its
    settings in field order. Raises nothing."""
    parts = [HEADER]
    for group, model in GROUPS.items():
        intro = _cell(inspect.cleandoc(model.__doc__ or ""))
        rows = []
        for name, field in model.model_fields.items():
            default = _default(field.default, field.default_factory)
            unit = unit_of(field) or "—"
            meaning = _cell(field.description or "")
            rows.append(f"| `{env_name(group, name)}` | {_cell(default)} | {_cell(unit)} | {meaning} |")
        parts.append(f"\n## {group}\n\n`settings.{group}`: {intro}\n\n" + TABLE_HEAD + "\n".join(rows) + "\n")
    parts.append(
        OLD_HEAD
        + "".join(
            f"| `FINAGENT_{old.upper()}` | `FINAGENT_{new.upper()}` |\n" for old, new in OLD_NAMES.items()
        )
    )
    return "".join(parts)


if __name__ == "__main__":
    print(render(), end="")  # noqa: T201
