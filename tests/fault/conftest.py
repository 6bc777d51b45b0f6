"""Fault-test fixtures: every test here is ``integration`` and ``fault`` (``-m "not fault"``
skips them; they start their own PostgreSQL, Redis or RabbitMQ vhost and worker processes).

The default run (``pyproject.toml`` addopts ``-m "not full"``) keeps the scenarios in
:data:`DEFAULT_SCENARIOS`: a broker restart, a killed worker child and a RabbitMQ connection loss.
Every other test here is also ``fault_full`` and ``full``; ``pytest -m fault_full`` runs those,
``pytest -m full`` (CI's second test command) those and the other slow tests left out of the
default run (the two runs together are the whole suite; docs/testing.md)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fault.harness import missing_tools

#: Test names (``node.name``) of the scenarios the default run keeps: one each of broker loss
#: (Redis restarted without persistence), worker loss (a prefork child killed mid-stage) and the
#: other broker (RabbitMQ closing every connection of the vhost).
DEFAULT_SCENARIOS = frozenset(
    {
        "test_batch_survives_fault[redis-redis-restart]",
        "test_batch_survives_fault[redis-kill-child]",
        "test_batch_survives_fault[rabbitmq-close-connections]",
    }
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test of this folder ``integration`` and ``fault`` (a ``pytestmark`` in a
    conftest applies to nothing: pytest reads it from test modules only), and ``fault_full``
    and ``full`` unless its name is in :data:`DEFAULT_SCENARIOS`.

    Runs before ``-m`` deselection: pluggy calls hooks last-registered first, and conftest
    plugins register after pytest's own ``mark`` plugin, so ``-m`` sees the markers added here."""
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.integration)
            item.add_marker(pytest.mark.fault)
            if item.name not in DEFAULT_SCENARIOS:
                item.add_marker(pytest.mark.fault_full)
                item.add_marker(pytest.mark.full)


@pytest.fixture
def scenario_folder(request: pytest.FixtureRequest) -> Iterator[Path]:
    """A folder for one scenario's logs, kept when the test fails (its path is in the failure
    message) and deleted when it passes."""
    folder = Path(tempfile.mkdtemp(prefix=f"finagent-fault-{request.node.name[:40]}-".replace("/", "_")))
    yield folder
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.passed:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Keep each phase's report on the item (``rep_call``) for :func:`scenario_folder`."""
    report = yield
    setattr(item, f"rep_{report.when}", report)
    return report


def require(broker: str) -> None:
    """Skip when the machine lacks what a scenario on ``broker`` needs; on CI (which starts
    PostgreSQL and Redis, .ci/run) a missing Postgres or Redis piece fails instead. RabbitMQ is
    not started by CI, so its absence always skips."""
    missing = missing_tools(broker)
    if missing:
        reason = f"fault tests need {', '.join(missing)}"
        if os.environ.get("CI") == "true" and broker != "rabbitmq":
            pytest.fail(reason)
        pytest.skip(reason)
