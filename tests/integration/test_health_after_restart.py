"""``GET /health``'s worker check after a Redis restart: the gateway process's pooled broker
connections are stale, and the first broadcast on one used to fail (503, "broadcast failed:
ConnectionError") although the broker and the worker were back. One retry on fresh
connections answers 200. A real worker and a private Redis restarted without persistence; the
health checks run in one long-lived process, as in a gateway."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.integration.conftest import Service, _ping
from tests.integration.ops_support import poll
from tests.support.private_services import PrivateRedis

#: Reads a line per check from stdin, prints check_health's checks as one JSON line each.
CHECKER = """
import json, sys
import tasks  # installs the task queue, as `finagent serve` has
from core.settings import get_settings
from apps.api.health import check_health
for _ in sys.stdin:
    print(json.dumps(check_health(settings=get_settings()).checks), flush=True)
"""


def test_the_first_health_check_after_a_redis_restart_finds_the_worker(
    service: Service, start_worker, private_redis: PrivateRedis
) -> None:
    service.env["FINAGENT_SERVICE_BROKER_URL"] = private_redis.url(0)
    service.env.pop("FINAGENT_SERVICE_RESULT_BACKEND", None)
    worker = start_worker()
    name = worker.args[worker.args.index("-n") + 1]
    checker = subprocess.Popen(
        [sys.executable, "-c", CHECKER], env=service.env, cwd=service.tmp, text=True,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    assert checker.stdin is not None and checker.stdout is not None

    def health() -> dict[str, str]:
        checker.stdin.write("check\n")  # type: ignore[union-attr]
        checker.stdin.flush()  # type: ignore[union-attr]
        return json.loads(checker.stdout.readline())  # type: ignore[union-attr]

    try:
        assert health()["worker"].startswith("ok"), "the worker answers before the restart"
        # when Redis restarts (every key and connection lost) and the worker reconnects
        private_redis.shutdown_nosave()
        private_redis.start()
        poll(lambda: _ping(service.env, name), timeout=120, what="the worker back on the restarted Redis")
        # then the gateway's first check on its stale connections finds it
        checks = health()
        assert checks["broker"] == "ok" and checks["worker"].startswith("ok"), checks
    finally:
        checker.stdin.close()
        checker.wait(timeout=30)
