"""A click group whose commands live in modules imported only when one of them runs.

The pattern of click's documentation ("Lazily Loading Subcommands"), plus two things it lacks:
the group's ``--help`` lists every command with the one-line summary given here, so it imports
no command module (and never cuts a summary mid-phrase, as click's ``short_help`` truncation of
a docstring does); and in the ``finagent`` process (:func:`settle_imports`, switched on by
``tasks.main.main``) a command's import runs with the cyclic garbage collector paused, and what
it loaded is then frozen out of the collector's sight.
"""

from __future__ import annotations

import gc
import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import click


@dataclass(frozen=True)
class LazyCommand:
    """Where a command lives and what ``--help`` says of it.

    Attributes:
        target: ``"package.module:attribute"`` of the ``click.Command`` (or group).
        summary: one line for the group's command list; at most :data:`SUMMARY_WIDTH` characters
            so that an 80-column terminal shows it whole.
    """

    target: str
    summary: str


#: Longest summary an 80-column ``--help`` prints whole: 80 - 2 (indent) - 11 (the longest
#: command name and its gap) - a margin for click's own indentation.
SUMMARY_WIDTH = 62


#: Whether this process is the ``finagent`` command (:func:`settle_imports`).
_settle = False


def settle_imports(enabled: bool = True) -> None:
    """Treat what a command's module imports as living as long as the process (the
    ``finagent`` command's own process: ``tasks.main.main`` switches this on; a test calling the
    click group in-process leaves it off).

    Then :meth:`LazyGroup.get_command` imports with the cyclic garbage collector paused and
    afterwards moves every object alive into its permanent generation (``gc.freeze``): the
    collections that importing pandas, SQLAlchemy and pydantic would trigger (each walking
    every object loaded so far), the command's own later full collections and the ones of the
    interpreter's exit then skip those objects. That is ~0.2 s of CPU of a ``finagent tool``
    or ``doctor`` call (docs/benchmarks.md, "CLI latency"); the price is that a reference cycle
    left over by an import is never freed (a bounded, one-time amount). The same freeze as a
    service worker's before it forks (``tasks.app``)."""
    global _settle
    _settle = enabled


def _import(module_name: str) -> ModuleType:
    """``importlib.import_module(module_name)``, settled when :func:`settle_imports` is on."""
    if not _settle:
        return importlib.import_module(module_name)
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return importlib.import_module(module_name)
    finally:
        gc.freeze()
        if was_enabled:
            gc.enable()


class LazyGroup(click.Group):
    """A ``click.Group`` with commands named in ``lazy`` and imported on first use."""

    def __init__(self, *args: Any, lazy: Mapping[str, LazyCommand] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy: dict[str, LazyCommand] = dict(lazy or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        """The eager and the lazy commands' names, sorted."""
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """The command ``cmd_name``, importing its module when it is a lazy one.

        Raises:
            TypeError: the target is not a click command (a wrong entry in the table).
            click.ClickException: importing the command's module read settings that do not
                validate (the Celery app is built from them at import): the one-line refusal of
                :func:`apps.cli.common.settings_refused`, not a traceback.
        """
        spec = self.lazy.get(cmd_name)
        if spec is None:
            return super().get_command(ctx, cmd_name)
        module_name, _, attribute = spec.target.partition(":")
        try:
            module = _import(module_name)
        except Exception as exc:
            # pydantic is imported here, not at the top: ``--help`` loads click and this package
            # only (a raised ValidationError means pydantic is loaded already)
            from pydantic import ValidationError

            if not isinstance(exc, ValidationError):
                raise
            from apps.cli.common import settings_refused

            raise settings_refused(exc) from None
        command = getattr(module, attribute)
        if not isinstance(command, click.Command):
            raise TypeError(f"{spec.target} is a {type(command).__name__}, not a click command")
        command.short_help = spec.summary
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list of ``--help`` from the summaries, without importing the commands."""
        rows = []
        for name in self.list_commands(ctx):
            spec = self.lazy.get(name)
            if spec is not None:
                rows.append((name, spec.summary))
                continue
            command = super().get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(limit=formatter.width)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)
