"""Operational invariants of the Celery configuration (docs/design.md, "Celery configuration")."""

from __future__ import annotations

import pytest

from core.settings import Settings
from tasks.app import celery_config, create_app


@pytest.fixture
def settings(clean_settings: None) -> Settings:
    return Settings(service_broker_url="redis://127.0.0.1:6379/0")


def test_json_only(settings: Settings) -> None:
    conf = celery_config(settings)
    assert conf["task_serializer"] == conf["result_serializer"] == conf["event_serializer"] == "json"
    assert conf["accept_content"] == ["json"]
    assert conf["result_accept_content"] == ["json"]


def test_late_acks_prefetch_one_and_a_killed_child_is_redelivered(settings: Settings) -> None:
    conf = celery_config(settings)
    assert conf["task_acks_late"] is True
    assert conf["worker_prefetch_multiplier"] == 1
    # requeued on WorkerLostError; celery#9082's endless loop is capped by the row's attempts
    assert conf["task_reject_on_worker_lost"] is True
    assert conf["task_acks_on_failure_or_timeout"] is True  # a hard time limit still fails
    assert conf["worker_cancel_long_running_tasks_on_connection_loss"] is True


def test_result_backend_writes_wait_out_a_broker_restart(settings: Settings) -> None:
    """A worker cancelling its late-ack tasks on connection loss writes RETRY to the result
    backend; on the restarting Redis that write must retry, not kill the worker
    (https://github.com/celery/celery/issues/7185), for minutes but not forever."""
    from celery.utils.time import get_exponential_backoff_interval

    conf = celery_config(settings)
    assert conf["worker_cancel_long_running_tasks_on_connection_loss"] is True
    assert conf["result_backend_always_retry"] is True
    base = conf["result_backend_base_sleep_between_retries_ms"]
    cap = conf["result_backend_max_sleep_between_retries_ms"]
    retries = conf["result_backend_max_retries"]
    assert 0 < base <= cap <= 5_000  # a worker resumes within a few seconds of Redis's return
    # Celery's own schedule (full jitter: uniform up to the bound): mean total of all sleeps.
    bounds_ms = [get_exponential_backoff_interval(base, n, cap) for n in range(1, int(retries) + 1)]
    mean_total_s = sum(bounds_ms) / 2 / 1000
    assert 60 <= mean_total_s <= 15 * 60


def test_amqp_heartbeat_notices_a_silently_closed_connection_within_a_minute(settings: Settings) -> None:
    """On RabbitMQ a connection closed mid-reconnect is noticed only by the heartbeat check
    (bench/redis_restart.py --broker rabbitmq); py-amqp gives up after two missed intervals."""
    conf = celery_config(settings)
    assert 5 <= conf["broker_heartbeat"] and 2 * conf["broker_heartbeat"] <= 60


def test_every_timeout_and_countdown_stays_below_the_visibility_timeout(settings: Settings) -> None:
    conf = celery_config(settings)
    visibility = conf["broker_transport_options"]["visibility_timeout"]
    # a running stage, or a retry waiting for its countdown, never outlives the visibility
    # timeout (Redis would redeliver a live message), and the lease outlives a stage
    assert conf["task_soft_time_limit"] < conf["task_time_limit"] < settings.durability.lease_seconds
    assert conf["task_time_limit"] + settings.durability.task_retry_backoff_max < visibility
    # a dead worker's message comes back within minutes, not the Redis default of an hour
    assert visibility <= 600
    # Worst case of the in-call tool retries of one tool call must fit in the soft limit.
    tool_worst = sum(settings.data.tool_backoff_base * 2**n for n in range(settings.data.tool_max_retries))
    tool_worst += (settings.data.tool_max_retries + 1) * settings.data.tool_timeout
    assert tool_worst < conf["task_soft_time_limit"]


def test_events_on_for_flower(settings: Settings) -> None:
    conf = celery_config(settings)
    assert conf["worker_send_task_events"] and conf["task_send_sent_event"] and conf["task_track_started"]


def test_stage_tasks_are_registered_on_their_queues(settings: Settings) -> None:
    app = create_app(settings)
    app.loader.import_default_modules()
    import tasks.stages  # noqa: F401  (registers on the module-level app)
    from tasks.app import app as module_app

    expected = {
        "finagent.research": "research",
        "finagent.analysis": "analysis",
        "finagent.recommendation": "recommendation",
        "finagent.review": "review",
        "finagent.should_continue": "control",
    }
    routes = module_app.conf.task_routes
    for name, queue in expected.items():
        assert routes[name] == {"queue": queue}
        assert module_app.tasks[name].acks_late is True
    assert module_app.tasks["finagent.research"].max_retries == settings.durability.task_max_retries


def test_embedded_mode_uses_the_memory_transport(clean_settings: None) -> None:
    settings = Settings()
    assert settings.service.mode == "embedded"
    app = create_app(settings)
    assert app.conf.broker_url == "memory://"
    assert settings.service.effective_database_url.startswith("sqlite:///")


def test_each_queue_has_its_own_routing_key(settings: Settings) -> None:
    """A bare Queue(name) binds to the default exchange/key, so one message would reach every queue."""
    queues = celery_config(settings)["task_queues"]
    stages = ["research", "analysis", "recommendation", "review"]
    assert sorted(q.routing_key for q in queues) == sorted(
        [*stages, *(f"{s}.batch" for s in stages), "control"]
    )
    assert all(q.exchange.name == q.name for q in queues)


def test_settings_refuse_limits_that_do_not_nest(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="FINAGENT_DURABILITY_VISIBILITY_TIMEOUT must exceed"):
        Settings(
            durability_visibility_timeout=200,
            durability_task_time_limit=180,
            durability_task_retry_backoff_max=60,
        )
    with pytest.raises(ValueError, match="FINAGENT_DURABILITY_LEASE_SECONDS must exceed"):
        Settings(durability_lease_seconds=100, durability_task_time_limit=180)
    with pytest.raises(ValueError, match="SOFT_TIME_LIMIT must be below"):
        Settings(durability_task_soft_time_limit=180, durability_task_time_limit=180)


def test_neither_beat_nor_the_workers_run_the_recovery_sweep(settings: Settings) -> None:
    # the sweep runs in the sweeper process (apps.sweeper): a task would run in the very
    # workers whose failure it must repair
    from tasks.app import app

    conf = celery_config(settings)
    assert set(conf["beat_schedule"]) == {
        "finagent-watchlists-tick",
        "finagent-scorecard-score",
        "finagent-archive",
    }
    assert not [name for name in conf["task_routes"] if "recovery" in name]
    assert not [step for step in app.steps["consumer"] if "Sweep" in getattr(step, "__name__", str(step))]


def test_rabbitmq_queues_are_quorum_behind_topic_exchanges_with_publisher_confirms(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    amqp = settings.model_copy(update={"service_broker_url": "amqp://guest:guest@127.0.0.1:5672/finagent"})
    conf = celery_config(amqp)
    queues = {q.name: q for q in conf["task_queues"]}
    stages = {"research", "analysis", "recommendation", "review"}
    assert set(queues) == {*stages, *(f"{s}.batch" for s in stages), "control"}
    for name, queue in queues.items():
        assert queue.queue_arguments == {"x-queue-type": "quorum"}
        # native delayed delivery (retry countdowns) needs topic exchanges on quorum queues
        assert (queue.exchange.name, queue.exchange.type, queue.routing_key) == (name, "topic", name)
    assert conf["broker_transport_options"] == {"confirm_publish": True}
    classic = celery_config(amqp.model_copy(update={"durability_rabbitmq_queue_type": "classic"}))
    assert all(q.queue_arguments is None and q.exchange.type == "direct" for q in classic["task_queues"])
    redis_conf = celery_config(settings.model_copy(update={"service_broker_url": "redis://127.0.0.1:6379/0"}))
    assert all(q.exchange.type == "direct" for q in redis_conf["task_queues"])
    assert (
        redis_conf["broker_transport_options"]["visibility_timeout"] == settings.durability.visibility_timeout
    )
