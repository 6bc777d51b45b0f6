"""Which Redis the tests use: a throwaway server of the test process's own unless the developer
pins databases of the shared server; xdist workers of one run never share a database."""

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


def test_unpinned_the_tests_use_a_redis_server_of_their_own() -> None:
    import shutil

    import redis

    from tests.support.redis_db import SHARED_PORT, private_test_redis, redis_url_for_tests

    if shutil.which("redis-server") is None:
        pytest.skip("redis-server not installed")
    url = redis_url_for_tests({})
    server = private_test_redis()
    # not the shared server: a port of its own, the same one for every call of the process
    assert url == server.url(0) and f":{SHARED_PORT}/" not in url
    assert redis_url_for_tests({}) == url
    client = redis.Redis.from_url(url)
    assert client.ping()
    # a throwaway: no persistence, nothing written to disk
    assert client.config_get("save")["save"] == "" and client.config_get("appendonly")["appendonly"] == "no"


def test_pinned_the_tests_use_the_shared_servers_database_they_were_told() -> None:
    from tests.support.redis_db import redis_url_for_tests

    assert redis_url_for_tests({"FINAGENT_TEST_REDIS_DB": "5"}) == "redis://127.0.0.1:6379/5"
    assert (
        redis_url_for_tests({"FINAGENT_TEST_REDIS_DB": "5", "PYTEST_XDIST_WORKER": "gw1"})
        == "redis://127.0.0.1:6379/6"
    )


def test_no_test_names_a_database_of_the_shared_server_itself() -> None:
    # every test reaches Redis through redis_url_for_tests (or a private server of its own):
    # a URL with a database of 127.0.0.1:6379 written in a test would write to, or flush, a
    # database nobody told the suite to use. URLs only parsed, never connected to, are fine.
    import re
    from pathlib import Path

    tests = Path(__file__).parent
    allowed = {
        # settings objects built from a URL, never connected to
        "tests/tasks/test_celery_app_beat.py", "tests/tasks/test_celery_app.py",
        "tests/pipeline/stages/test_common.py", "tests/core/test_settings_groups.py",
        "tests/llm/test_time_budget.py", "tests/tasks/test_stage_adapter.py",
        "tests/test_redis_db.py",
    }  # fmt: skip
    offenders = [
        str(p.relative_to(tests.parent))
        for p in tests.rglob("*.py")
        if re.search(r"redis://[^\s\"']*127\.0\.0\.1:6379/\d", p.read_text(encoding="utf-8"))
        and str(p.relative_to(tests.parent)) not in allowed
    ]
    assert offenders == []
