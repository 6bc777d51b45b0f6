"""Operational invariants of beat and the watchlist tasks (docs/design.md, "Beat and Flower")."""

from __future__ import annotations

from core.settings import Settings
from tasks.app import TASK_QUEUES, celery_config


def test_one_beat_via_the_redbeat_lock() -> None:
    settings = Settings(service_broker_url="redis://127.0.0.1:6379/3")
    conf = celery_config(settings)
    assert conf["beat_scheduler"] == "redbeat.RedBeatScheduler"
    assert conf["redbeat_redis_url"] == settings.service.broker_url
    # the lock is extended every loop, so it must outlive several loops, and a dead beat's lock
    # must expire long before the next nightly run
    assert conf["redbeat_lock_timeout"] >= 3 * conf["beat_max_loop_interval"]
    assert conf["redbeat_lock_timeout"] < 600


def test_tick_entry_is_routed_and_expires() -> None:
    settings = Settings(service_broker_url="redis://127.0.0.1:6379/3")
    entry = celery_config(settings)["beat_schedule"]["finagent-watchlists-tick"]
    assert entry["task"] == "finagent.watchlists.tick"
    assert entry["options"]["expires"] == settings.watchlists.tick_seconds
    for name in ("finagent.watchlists.tick", "finagent.watchlists.start_run", "finagent.watchlists.finalize"):
        assert TASK_QUEUES[name] == "control"


def test_finalizer_countdown_is_far_below_the_visibility_timeout() -> None:
    settings = Settings()
    assert settings.watchlists.finalize_countdown * 10 <= settings.durability.visibility_timeout


def test_watchlist_tasks_are_registered_with_late_acks() -> None:
    import tasks.watchlists  # noqa: F401  (registers on the module-level app)
    from tasks.app import app

    for name in ("finagent.watchlists.tick", "finagent.watchlists.start_run", "finagent.watchlists.finalize"):
        assert app.tasks[name].acks_late is True


def test_archive_entry_runs_hourly_on_the_control_queue_unless_disabled() -> None:
    import tasks.archive  # noqa: F401  (registers on the module-level app)
    from tasks.app import app

    settings = Settings(service_broker_url="redis://127.0.0.1:6379/3")
    entry = celery_config(settings)["beat_schedule"]["finagent-archive"]
    assert (
        entry["task"] == "finagent.archive.run" and entry["schedule"] == entry["options"]["expires"] == 3600
    )
    assert TASK_QUEUES["finagent.archive.run"] == "control"
    assert app.tasks["finagent.archive.run"].acks_late is True
    off = Settings(service_broker_url="redis://127.0.0.1:6379/3", durability_archive_after_seconds=0)
    assert "finagent-archive" not in celery_config(off)["beat_schedule"]
