"""Gateway fixtures: the FastAPI app served by uvicorn on 127.0.0.1 (real HTTP), SQLite."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

import pytest
import uvicorn

from apps.api.app import create_app
from apps.api.auth import create_key
from core.settings import Settings
from db.migrate import upgrade

#: ``api.max_body_bytes`` of the ``gateway`` fixture.
LIMIT = 64 * 1024
#: The ``make_gateway`` fixture: ``make(**settings overrides) -> (base URL, settings)``.
Gateway = Callable[..., tuple[str, Settings]]


@pytest.fixture(autouse=True)
def fresh_failed_auth_buckets() -> Iterator[None]:
    """Every test starts with full failed-authentication buckets: the gateways of these tests
    share one process (its buckets, ``agents.data.market.shared``) and one client address
    (127.0.0.1), so the 401s of earlier tests would otherwise count against later ones."""
    from agents.data.market import shared

    def clear() -> None:
        with shared._local_lock:
            for name in [n for n in shared._local if n.startswith("api-failed-auth:")]:
                del shared._local[name]

    clear()
    yield
    clear()


@contextmanager
def serve_app(settings: Settings, *, lifespan: Literal["on", "off"] = "off") -> Iterator[str]:
    """Serve ``create_app(settings)`` with uvicorn on a free 127.0.0.1 port in a thread; yields
    the base URL and stops the server on exit (lifespan ``on`` starts the embedded worker)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(settings), host="127.0.0.1", port=port, lifespan=lifespan, log_level="warning"
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.started
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[tuple[str, str, Settings]]:
    """``(base URL, API key, settings)`` of a gateway on a migrated SQLite file, lifespan off."""
    url = f"sqlite:///{tmp_path / 'api.sqlite3'}"
    upgrade(url=url)
    settings = Settings(service_database_url=url, service_state_dir=tmp_path, api_max_body_bytes=LIMIT)
    key = create_key(name="limits", settings=settings)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    # lifespan off: no embedded worker is needed to refuse or validate a request
    server = uvicorn.Server(
        uvicorn.Config(create_app(settings), host="127.0.0.1", port=port, lifespan="off", log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.started
    try:
        yield f"http://127.0.0.1:{port}", key, settings
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@pytest.fixture
def make_gateway(tmp_path: Path) -> Iterator[Gateway]:
    """Factory: ``(base URL, settings)`` of a gateway (lifespan off: enqueued analyses stay
    ``queued``) on a fresh migrated SQLite file with ``Settings(**overrides)``."""
    stack: list[Any] = []

    def make(**overrides: Any) -> tuple[str, Settings]:
        url = f"sqlite:///{tmp_path / f'api{len(stack)}.sqlite3'}"
        upgrade(url=url)
        settings = Settings(service_database_url=url, service_state_dir=tmp_path, **overrides)
        context = serve_app(settings)
        stack.append(context)
        return context.__enter__(), settings

    yield make
    for context in reversed(stack):
        context.__exit__(None, None, None)
