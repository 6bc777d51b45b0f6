"""The commands the README and docs/ show exist as written.

Every shell command in a fenced block of README.md or docs/*.md (blocks marked ``bash``, ``sh``,
``shell`` or ``console``, and lines starting with ``$ `` in unmarked blocks) is split into words;
each ``finagent …`` invocation in it must name an existing subcommand (``finagent <cmd> --help``
exits 0), every ``--option`` it passes must be an option of that subcommand (unless the
subcommand hands unknown options on, as ``worker``, ``beat`` and ``flower`` do to Celery and
Flower), and ``finagent tool NAME`` must name a registered tool. README also shows, on a line of
its own, the test command ``.ci/run`` runs.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from agents.tools.catalog import get_tool
from apps.cli import main

ROOT = Path(__file__).resolve().parents[1]
DOC_FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELL_LANGUAGES = {"bash", "sh", "shell", "console"}
#: Words that end a command: shell operators, after which another program runs.
OPERATORS = {"|", "||", "&", "&&", ";", "(", ")", ">", "<", ">>", "2>", "$("}
#: Placeholders the docs write where a value goes (not commands, not tool names).
PLACEHOLDERS = {"NAME", "ID", "...", "…"}
#: Programs whose ``finagent`` argument is a database name.
DATABASE_TOOLS = {"createdb", "dropdb", "psql"}


@dataclass(frozen=True)
class Invocation:
    """One ``finagent`` call found in a document: where, and its words after ``finagent``."""

    source: str
    words: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.source}: finagent {' '.join(self.words)}"


def shell_lines(text: str) -> list[str]:
    """The shell command lines of the fenced blocks of a Markdown ``text``.

    Lines continued with a trailing backslash are joined; a ``$ `` prompt is removed. Blocks in
    other languages (python, yaml, text, …) are skipped; unmarked blocks contribute only their
    prompt lines, as they also hold pasted output.
    """
    lines: list[str] = []
    fence: str | None = None
    language = ""
    pending = ""
    for raw in text.splitlines():
        stripped = raw.strip()
        if fence is None:
            match = re.match(r"^(`{3,}|~{3,})\s*([\w+-]*)", stripped)
            if match:
                fence, language = match.group(1), match.group(2).lower()
            continue
        if stripped.startswith(fence):
            fence = None
            continue
        if language in SHELL_LANGUAGES:
            line = stripped[2:] if stripped.startswith("$ ") else stripped
        elif language == "" and stripped.startswith("$ "):
            line = stripped[2:]
        else:
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        lines.append(pending + line)
        pending = ""
    return lines


def split_words(line: str) -> list[str]:
    """Shell words of ``line`` with comments removed and operators as words of their own."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    try:
        return list(lexer)
    except ValueError:  # an unbalanced quote in prose-like lines: split on spaces instead
        return line.split("#", 1)[0].split()


def finagent_invocations(path: Path) -> list[Invocation]:
    """Every ``finagent`` call in the shell blocks of the document at ``path``."""
    found: list[Invocation] = []
    rel = path.relative_to(ROOT).as_posix()
    for line in shell_lines(path.read_text(encoding="utf-8")):
        words = split_words(line)
        for index, word in enumerate(words):
            if word != "finagent" and not (word.endswith("/finagent") and "://" not in word):
                continue
            if DATABASE_TOOLS & set(words[:index]):
                continue  # `createdb … finagent`: a database named finagent, not the program
            rest: list[str] = []
            for following in words[index + 1 :]:
                if following in OPERATORS or following.startswith(("$(", ">", "2>")):
                    break
                rest.append(following)
            found.append(Invocation(rel, tuple(rest)))
    return found


def resolve(words: tuple[str, ...]) -> tuple[list[str], click.Command, list[str]]:
    """Walk ``words`` down the CLI's groups: (command path, command, the words left)."""
    command: click.Command = main
    path: list[str] = []
    rest = list(words)
    with click.Context(main) as ctx:
        while isinstance(command, click.Group) and rest and rest[0] in command.list_commands(ctx):
            path.append(rest.pop(0))
            found = command.get_command(ctx, path[-1])
            assert found is not None, path
            command = found
    return path, command, rest


def option_names(command: click.Command) -> set[str]:
    """Every option spelling ``command`` accepts, help included."""
    names = {"-h", "--help"}
    for param in command.params:
        if isinstance(param, click.Option):
            names.update(param.opts)
            names.update(param.secondary_opts)
    return names


INVOCATIONS = [invocation for path in DOC_FILES for invocation in finagent_invocations(path)]


def test_the_docs_show_finagent_commands() -> None:
    """The extraction finds the README's commands (so the checks below check something)."""
    readme = [inv for inv in INVOCATIONS if inv.source == "README.md"]
    subcommands = {resolve(inv.words)[0][0] for inv in readme if resolve(inv.words)[0]}
    assert {"analyze", "db", "tool", "show", "chart", "apikey", "serve"} <= subcommands


def test_readme_keeps_ci_test_command() -> None:
    """``.ci/run`` runs README's test command; README shows it as written."""
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    marker = next(
        i for i, line in enumerate(ci) if line.startswith("echo") and "README's test command" in line
    )
    command = ci[marker + 1].strip()
    assert command.startswith("uv run") and "pytest" in command
    assert command in shell_lines((ROOT / "README.md").read_text(encoding="utf-8"))


@pytest.mark.parametrize("invocation", INVOCATIONS, ids=str)
def test_documented_finagent_command_exists(invocation: Invocation) -> None:
    """The subcommand answers ``--help`` with exit 0, and takes every option the docs pass it."""
    path, command, rest = resolve(invocation.words)
    assert not (isinstance(command, click.Group) and rest and not rest[0].startswith("-")), (
        f"{invocation}: {rest[0]!r} is not a subcommand of finagent {' '.join(path)}".rstrip()
    )
    result = CliRunner().invoke(main, [*path, "--help"])
    assert result.exit_code == 0, f"{invocation}: `finagent {' '.join(path)} --help` -> {result.output}"
    passes_unknown = bool(command.context_settings.get("ignore_unknown_options"))
    known = option_names(command)
    for word in rest:
        option = word.strip("[]").split("=", 1)[0]
        if option.startswith("-") and len(option) > 1 and option not in {"-", "--"}:
            assert option in known or passes_unknown, f"{invocation}: no option {option}"
    if path == ["tool"] and rest and not rest[0].startswith("-") and rest[0] not in PLACEHOLDERS:
        get_tool(rest[0])  # raises KeyError for a tool that does not exist


def test_the_key_recipes_work_in_any_order_and_again(tmp_path: Path) -> None:
    """Every ``KEY=$(… finagent apikey create …)`` line of README and docs/ gives a working key,
    run one after another on one database and then all again (README's and the console page's
    both name the key ``me``: a re-run must not leave ``$KEY`` empty)."""
    import os
    import subprocess
    import sys

    from apps.api.auth import authenticate
    from core.settings import Settings

    recipes = [
        line
        for path in DOC_FILES
        for line in shell_lines(path.read_text(encoding="utf-8"))
        if line.startswith("KEY=$(") and "apikey create" in line
    ]
    assert len(recipes) >= 3  # README, docs/api.md, docs/console.md
    finagent = str(Path(sys.executable).with_name("finagent"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("FINAGENT_")}
    env["FINAGENT_SERVICE_STATE_DIR"] = str(tmp_path / "state")
    settings = Settings(service_state_dir=tmp_path / "state")
    keys = []
    for line in recipes * 2:
        script = line.replace("uv run finagent", finagent) + '\necho "$KEY"'
        proc = subprocess.run(
            ["bash", "-c", script],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        key = proc.stdout.strip()
        assert re.fullmatch(r"fa_[0-9a-f]{12}_[A-Za-z0-9_-]{20,100}", key), f"{line}: {proc.stderr[-500:]}"
        keys.append(key)
    assert authenticate(token=keys[-1], settings=settings).name == "me"
    assert len(set(keys)) == len(keys)  # a re-run gave a new secret ...
    with pytest.raises(Exception, match="invalid API key"):
        authenticate(token=keys[0], settings=settings)  # ... and the old one stopped working
