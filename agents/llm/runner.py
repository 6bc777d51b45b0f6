"""One long-lived asyncio event loop per process for LiteLLM's async calls.

Stages are synchronous (Celery prefork children, or the embedded worker thread). ``asyncio.run``
per call would create and close a loop each time, while LiteLLM caches HTTP clients bound to the
loop that created them ("Event loop is closed" on the next call). So coroutines are submitted to
one daemon loop thread, created lazily per process id (a forked child starts its own).
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Coroutine
from typing import Any

_LOCK = threading.Lock()
_LOOP: asyncio.AbstractEventLoop | None = None
_PID: int | None = None


def _loop() -> asyncio.AbstractEventLoop:
    global _LOOP, _PID
    with _LOCK:
        if _LOOP is None or os.getpid() != _PID or _LOOP.is_closed():
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="finagent-llm-loop", daemon=True)
            thread.start()
            _LOOP, _PID = loop, os.getpid()
        return _LOOP


def run_sync[T](coro: Coroutine[Any, Any, T], *, timeout: float | None = None) -> T:
    """Run ``coro`` on the process's LLM loop thread and return its result (or raise its error).

    Must not be called from the loop thread itself (it would deadlock); raises RuntimeError then.
    ``timeout`` (seconds) bounds the wait; ``TimeoutError`` cancels the coroutine.
    """
    loop = _loop()
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        coro.close()
        raise RuntimeError("run_sync called from the LLM loop thread")
    future = asyncio.run_coroutine_threadsafe(coro, loop)
    try:
        return future.result(timeout=timeout)
    except TimeoutError:
        future.cancel()
        raise
