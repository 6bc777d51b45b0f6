"""Child process of the indicator sandbox: run one restricted script, print one JSON line.

Usage (by :func:`agents.tools.sandbox.execute_script` only)::

    python -I runner.py PAYLOAD.json

``PAYLOAD.json`` is ``{code, index: [ISO dates], open, high, low, close, volume: [floats],
memory_mb}``. The runner

1. imports pandas, numpy, pandas-ta and RestrictedPython (before any limit, ~0.6 s),
2. builds the ``open/high/low/close/volume`` ``pd.Series`` (DatetimeIndex, adjusted USD prices),
3. compiles the code with RestrictedPython (imports rejected before compiling; names and
   attributes starting with ``_`` are refused by RestrictedPython itself),
4. caps the address space (``RLIMIT_AS`` = current size + ``memory_mb``) and the file
   descriptors (``RLIMIT_NOFILE`` = the ones already open, so no file or socket can be opened),
5. writes ``ready`` on stdout (the parent starts the wall-clock timer), runs the script, and
6. writes ``{"ok": true, "result": {...}}`` or ``{"ok": false, "kind": ..., "message": ...}``.

The parent validates ``result`` again (pydantic) and kills this process on timeout; nothing here
is trusted for the limits that matter.
"""

from __future__ import annotations

import ast
import json
import math
import os
import resource
import sys
import types
from typing import Any

# The real stdout is kept for the protocol; anything the libraries print goes to stderr.
_PROTOCOL = os.fdopen(os.dup(1), "w", buffering=1)
os.dup2(2, 1)

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pandas_ta as ta  # noqa: E402
from RestrictedPython import compile_restricted, limited_builtins, safe_builtins  # noqa: E402
from RestrictedPython.Eval import default_guarded_getitem, default_guarded_getiter  # noqa: E402
from RestrictedPython.Guards import (  # noqa: E402
    full_write_guard,
    guarded_iter_unpack_sequence,
    guarded_unpack_sequence,
    raise_,
    safer_getattr,
)

MAX_RESULT_KEYS = 64
MAX_LIST_LEN = 1000

#: Attribute names refused on any object: file and network I/O, code evaluation, plotting.
_DENIED_ATTRS = frozenset(
    {
        "load",
        "loads",
        "save",
        "savez",
        "savez_compressed",
        "savetxt",
        "loadtxt",
        "genfromtxt",
        "fromfile",
        "tofile",
        "memmap",
        "fromregex",
        "DataSource",
        "ctypeslib",
        "ctypes",
        "lib",
        "io",
        "os",
        "sys",
        "eval",
        "query",
        "plot",
        "hist",
        "boxplot",
        "style",
        "api",
        "compat",
        "core",
        "testing",
        "f2py",
        "distutils",
        "util",
        "utils",
        "options",
        "set_option",
        "get_option",
        "option_context",
        "describe_option",
        "reset_option",
        "show_versions",
        "ExcelWriter",
        "HDFStore",
        "pipe",
        "attrs",
        "flags",
        "__dict__",
    }
)
_ALLOWED_TO = frozenset({"to_numpy", "to_list", "to_dict", "to_frame", "to_period", "to_timestamp"})
#: Callables/classes from these modules are never returned (``pd.Path``-style re-exports).
_DENIED_MODULE_PREFIXES = (
    "os",
    "sys",
    "subprocess",
    "io",
    "importlib",
    "pathlib",
    "shutil",
    "socket",
    "pickle",
    "builtins",
    "ctypes",
    "urllib",
    "http",
    "multiprocessing",
    "threading",
    "signal",
    "code",
    "inspect",
    "gc",
    "runpy",
    "tempfile",
    "glob",
    "fsspec",
    "requests",
    "pandas.io",
    "numpy.lib.npyio",
)
_ALLOWED_MODULES = frozenset({"numpy.random", "numpy.linalg", "math"})


class SandboxRefused(Exception):
    """A name, attribute or statement the sandbox does not allow."""


def _guarded_getattr(obj: Any, name: str, *default: Any) -> Any:
    """RestrictedPython's ``safer_getattr`` (no ``_`` names, no frame/code/traceback attributes
    such as ``gi_frame``/``f_globals``, no ``str.format``) plus the I/O and module rules above; a
    missing attribute raises ``AttributeError`` as in Python unless a default is given."""
    if not isinstance(name, str):
        raise TypeError("attribute name must be a string")
    if (
        name in _DENIED_ATTRS
        or name.startswith("read_")
        or (name.startswith("to_") and name not in _ALLOWED_TO)
    ):
        raise SandboxRefused(f"attribute {name!r} is not available in the sandbox")
    value = safer_getattr(obj, name, default[0] if default else raise_)
    if isinstance(value, types.ModuleType) and value.__name__ not in _ALLOWED_MODULES:
        raise SandboxRefused(f"module attribute {name!r} is not available in the sandbox")
    module = getattr(value, "__module__", None) if callable(value) else None
    if isinstance(module, str) and module.split(".")[0] in _DENIED_MODULE_PREFIXES:
        raise SandboxRefused(f"attribute {name!r} ({module}) is not available in the sandbox")
    if isinstance(module, str) and module.startswith(("pandas.io", "numpy.lib.npyio")):
        raise SandboxRefused(f"attribute {name!r} ({module}) is not available in the sandbox")
    return value


def _inplacevar(op: str, x: Any, y: Any) -> Any:
    ops = {
        "+=": lambda a, b: a + b,
        "-=": lambda a, b: a - b,
        "*=": lambda a, b: a * b,
        "/=": lambda a, b: a / b,
        "//=": lambda a, b: a // b,
        "%=": lambda a, b: a % b,
        "**=": lambda a, b: a**b,
    }
    if op not in ops:
        raise SandboxRefused(f"in-place operator {op} is not available in the sandbox")
    return ops[op](x, y)


def _ta_namespace() -> types.SimpleNamespace:
    """Only pandas-ta's indicator functions (``ta.Category``), none of its file helpers."""
    names = sorted({n for group in ta.Category.values() for n in group} | {"sma", "ema", "rsi", "macd"})
    return types.SimpleNamespace(**{n: getattr(ta, n) for n in names if hasattr(ta, n)})


def _builtins() -> dict[str, Any]:
    allowed = dict(safe_builtins)
    allowed.update(limited_builtins)
    for name in ("setattr", "delattr", "__build_class__"):
        allowed.pop(name, None)
    allowed.update(
        {
            "min": min,
            "max": max,
            "sum": sum,
            "any": any,
            "all": all,
            "enumerate": enumerate,
            "zip": zip,
            "sorted": sorted,
            "reversed": reversed,
            "map": map,
            "filter": filter,
            "list": list,
            "dict": dict,
            "set": set,
            "frozenset": frozenset,
            "isinstance": isinstance,
            "math": math,
            "getattr": _guarded_getattr,
        }
    )
    return allowed


def _reject_imports(code: str) -> None:
    tree = ast.parse(code, filename="<indicator>")
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            raise SandboxRefused(
                f"line {node.lineno}: import statements are not allowed (pd, np, ta are given)"
            )


def _plain(value: Any, key: str) -> Any:
    """numpy/pandas scalars and 1-d arrays → plain JSON values; anything else refused."""
    if isinstance(value, bool | np.bool_):
        return bool(value)
    if isinstance(value, int | np.integer):
        return int(value)
    if isinstance(value, float | np.floating):
        number = float(value)
        if not math.isfinite(number):
            raise SandboxRefused(f"result[{key!r}] is not finite ({number})")
        return number
    if isinstance(value, str):
        return value
    if isinstance(value, pd.Series | np.ndarray | list | tuple):
        items = list(value.tolist() if hasattr(value, "tolist") else value)
        if len(items) > MAX_LIST_LEN:
            raise SandboxRefused(f"result[{key!r}] has {len(items)} items (max {MAX_LIST_LEN})")
        return [_plain(item, key) for item in items]
    raise SandboxRefused(f"result[{key!r}] has unsupported type {type(value).__name__}")


def _cap_resources(memory_mb: int) -> None:
    with open("/proc/self/statm") as fh:
        pages = int(fh.read().split()[0])
    current = pages * os.sysconf("SC_PAGE_SIZE")
    limit = current + memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    # A new descriptor always takes the lowest free number: capping at it refuses every open(),
    # socket() or pipe() while the descriptors already open (stdout for the answer) keep working.
    cap = 0
    while True:
        try:
            os.fstat(cap)
        except OSError:
            break
        cap += 1
    resource.setrlimit(resource.RLIMIT_NOFILE, (cap, cap))


def _emit(payload: dict[str, Any]) -> None:
    _PROTOCOL.write(json.dumps(payload) + "\n")
    _PROTOCOL.flush()


def run(payload: dict[str, Any]) -> dict[str, Any]:
    """Execute ``payload['code']`` restricted; return the protocol answer (never raises)."""
    code = payload["code"]
    index = pd.DatetimeIndex(pd.to_datetime(payload["index"]), name="date")
    series = {
        name: pd.Series(payload[name], index=index, name=name, dtype="float64")
        for name in ("open", "high", "low", "close", "volume")
    }
    try:
        _reject_imports(code)
        byte_code = compile_restricted(code, filename="<indicator>", mode="exec")
    except SyntaxError as exc:
        # RestrictedPython raises one SyntaxError whose msg is the tuple of all its refusals.
        text = "; ".join(exc.msg) if isinstance(exc.msg, tuple) else f"{exc.msg} (line {exc.lineno})"
        return {"ok": False, "kind": "refused", "message": text}
    except SandboxRefused as exc:
        return {"ok": False, "kind": "refused", "message": str(exc)}
    env: dict[str, Any] = {
        "__builtins__": _builtins(),
        "__name__": "indicator",
        "_getattr_": _guarded_getattr,
        "_getitem_": default_guarded_getitem,
        "_getiter_": default_guarded_getiter,
        "_iter_unpack_sequence_": guarded_iter_unpack_sequence,
        "_unpack_sequence_": guarded_unpack_sequence,
        "_write_": full_write_guard,
        "_inplacevar_": _inplacevar,
        "pd": pd,
        "np": np,
        "ta": _ta_namespace(),
        "result": {},
        **series,
    }
    # Warm pandas' lazy imports before the descriptor cap (repr and rolling load modules).
    repr(series["close"].tail(3))
    ta.rsi(series["close"], length=2)
    _cap_resources(int(payload["memory_mb"]))
    _emit({"ready": True})
    try:
        exec(byte_code, env)  # noqa: S102 - RestrictedPython byte code with guarded globals
    except MemoryError:
        return {"ok": False, "kind": "memory", "message": "the script exceeded the sandbox memory limit"}
    except SandboxRefused as exc:
        return {"ok": False, "kind": "refused", "message": str(exc)}
    except Exception as exc:
        return {"ok": False, "kind": "script_error", "message": f"{type(exc).__name__}: {exc}"[:500]}
    result = env.get("result")
    if not isinstance(result, dict):
        return {"ok": False, "kind": "invalid_result", "message": "`result` must be a dict"}
    if len(result) > MAX_RESULT_KEYS:
        return {
            "ok": False,
            "kind": "invalid_result",
            "message": f"`result` has more than {MAX_RESULT_KEYS} keys",
        }
    try:
        plain = {str(k): _plain(v, str(k)) for k, v in result.items()}
    except SandboxRefused as exc:
        return {"ok": False, "kind": "invalid_result", "message": str(exc)}
    except MemoryError:
        return {"ok": False, "kind": "memory", "message": "the result exceeded the sandbox memory limit"}
    return {"ok": True, "result": plain}


def main() -> None:
    """Entry point: read the payload file named on the command line, answer on stdout."""
    with open(sys.argv[1]) as fh:
        payload = json.load(fh)
    try:
        answer = run(payload)
    except MemoryError:
        answer = {"ok": False, "kind": "memory", "message": "the script exceeded the sandbox memory limit"}
    _emit(answer)


if __name__ == "__main__":
    main()
