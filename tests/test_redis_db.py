"""The Redis database of each pytest process: xdist workers of one run never share one."""

from __future__ import annotations

import pytest

from tests.support.redis_db import redis_db_for_process


def test_a_pinned_database_is_used_as_is_without_xdist() -> None:
    assert redis_db_for_process({"FINAGENT_TEST_REDIS_DB": "12"}, pid=7, ppid=1) == 12


def test_each_xdist_worker_adds_its_number_to_the_pinned_database() -> None:
    dbs = [
        redis_db_for_process({"FINAGENT_TEST_REDIS_DB": "10", "PYTEST_XDIST_WORKER": f"gw{k}"}, pid=k, ppid=1)
        for k in range(4)
    ]
    assert dbs == [10, 11, 12, 13]


def test_a_pinned_database_past_15_is_refused() -> None:
    with pytest.raises(ValueError, match="outside 0-15"):
        redis_db_for_process({"FINAGENT_TEST_REDIS_DB": "15", "PYTEST_XDIST_WORKER": "gw1"}, pid=1, ppid=1)


@pytest.mark.parametrize("run", [100, 101, 102, 103, 104, 105])
def test_unpinned_workers_of_one_run_get_distinct_databases_in_10_to_15(run: int) -> None:
    dbs = {redis_db_for_process({"PYTEST_XDIST_WORKER": f"gw{k}"}, pid=1000 + k, ppid=run) for k in range(6)}
    assert dbs == set(range(10, 16))


def test_unpinned_single_process_uses_its_own_pid() -> None:
    assert redis_db_for_process({}, pid=6 * 9 + 3, ppid=0) == 13
