"""Bytecode for the suite's Python processes where the shell turns it off.

The suite starts several hundred Python processes (``finagent`` CLI calls, workers, gateways,
beat, Flower, probes). With ``PYTHONDONTWRITEBYTECODE`` set and a ``.venv`` installed without
``--compile-bytecode`` (README's ``uv run`` does not compile), every one of them compiled every
module it imported from source: a ``finagent worker`` spent ~6 s of CPU before it answered a
ping instead of ~2 s (measured on the 2-core machine of docs/testing.md). The tests then point
``PYTHONPYCACHEPREFIX`` at a folder of their own and let Python write there, so each module is
compiled once per run; the source tree and ``.venv`` stay without ``__pycache__`` folders, as
the setting asked (Python docs, "PYTHONPYCACHEPREFIX": the prefix tree mirrors the source paths).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, MutableMapping
from pathlib import Path

#: The variables Python reads at start: bytecode off, and where a prefix tree goes.
NO_BYTECODE, PREFIX = "PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX"


def bytecode_prefix(environ: Mapping[str, str], folder: Path) -> Path | None:
    """The prefix tree the tests' processes should write bytecode to: ``folder`` when ``environ``
    turns bytecode writing off (``PYTHONDONTWRITEBYTECODE`` non-empty, Python's rule) and names
    no prefix of its own; ``None`` otherwise (Python already keeps bytecode where the developer
    wants it). Pure; raises nothing."""
    if environ.get(PREFIX) or not environ.get(NO_BYTECODE):
        return None
    return folder


def keep_bytecode(folder: Path, environ: MutableMapping[str, str] | None = None) -> Path | None:
    """Apply :func:`bytecode_prefix` to ``environ`` (default: this process's environment, which
    the pytest-xdist workers and every subprocess the tests start inherit) and to this process's
    later imports (``sys.pycache_prefix``, ``sys.dont_write_bytecode``). Returns the prefix
    folder in use, ``None`` when nothing changed. Raises nothing: the folder is made by Python
    when it first writes a file there, and a failed write only costs a compile."""
    env = os.environ if environ is None else environ
    prefix = bytecode_prefix(env, folder)
    if prefix is None:
        return None
    env.pop(NO_BYTECODE, None)
    env[PREFIX] = str(prefix)
    if environ is None:
        sys.pycache_prefix = str(prefix)
        sys.dont_write_bytecode = False
    return prefix
