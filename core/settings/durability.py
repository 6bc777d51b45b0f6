"""The ``durability`` group of the settings (``Settings.durability``); variables stay ``FINAGENT_<FIELD>``."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class DurabilitySettings(BaseModel):
    """Durability of the stage tasks: Celery time limits and retries, the Redis visibility
    timeout, RabbitMQ queue type, leases and the recovery sweeper (docs/architecture.md,
    "Durability: the arithmetic").
    """

    model_config = ConfigDict(extra="forbid", validate_default=True)

    # Celery task-level policy and durability (docs/architecture.md, "Durability: the arithmetic").
    # The Redis visibility timeout must exceed the longest time a message is legitimately held
    # unacked: a running stage (task_time_limit) or a retry waiting for its countdown
    # (task_retry_backoff_max); past it Redis redelivers (celery#2599, #4400).
    # 180 + 120 < 420: a message of a worker killed with SIGKILL returns within 7 minutes.
    visibility_timeout: int = Field(
        default=420,
        ge=10,
        description="Redis visibility timeout, seconds (> task_time_limit + backoff max).",
        json_schema_extra={"unit": "s"},
    )
    task_soft_time_limit: int = Field(
        default=120,
        ge=1,
        description="Seconds; a stage task's soft time limit (it may still checkpoint).",
        json_schema_extra={"unit": "s"},
    )
    task_time_limit: int = Field(
        default=180,
        ge=1,
        description="Seconds; a stage task's hard time limit (the process is killed).",
        json_schema_extra={"unit": "s"},
    )
    task_max_retries: int = Field(
        default=5,
        ge=0,
        description="Celery retries of a stage task (exponential backoff).",
        json_schema_extra={"unit": "retries"},
    )
    task_retry_backoff_max: int = Field(
        default=120,
        ge=1,
        description="Cap of the exponential task backoff, seconds.",
        json_schema_extra={"unit": "s"},
    )
    max_redeliveries: int = Field(
        default=3,
        ge=0,
        description="Redelivered copies of one stage message (a killed worker) allowed.",
        json_schema_extra={"unit": "redeliveries"},
    )
    rabbitmq_queue_type: Literal["quorum", "classic"] = Field(
        default="quorum",
        description=(
            "RabbitMQ only: queue type of the finagent queues. Quorum queues are replicated and "
            "durable (a queued message survives a broker restart); classic ones are durable too."
        ),
    )
    lease_seconds: int = Field(
        default=300,
        ge=5,
        description=(
            "Lease of an analysis on its current step: a stage that holds it longer (above "
            "task_time_limit) or a step nobody started within it is stalled and re-driven."
        ),
        json_schema_extra={"unit": "s"},
    )
    max_recoveries: int = Field(
        default=3,
        ge=0,
        description="Re-drives of one analysis by the recovery sweep before it fails STALLED.",
        json_schema_extra={"unit": "re-drives"},
    )
    sweep_seconds: int = Field(
        default=60,
        ge=1,
        description="Seconds between recovery sweeps (`finagent sweeper`).",
        json_schema_extra={"unit": "s"},
    )
    worker_heartbeat_seconds: float = Field(
        default=5.0,
        ge=0.5,
        le=300,
        description=(
            "Seconds between two heartbeats of a worker (a row of service_heartbeats listing "
            "the tasks it holds), which the recovery sweeper reads to tell a dead worker."
        ),
        json_schema_extra={"unit": "s"},
    )
    worker_dead_seconds: float = Field(
        default=20.0,
        ge=1,
        description=(
            "A worker silent for this long that does not answer a ping is dead: the recovery "
            "sweeper re-drives the analyses it held at once instead of waiting for their lease. "
            "At least two heartbeats."
        ),
        json_schema_extra={"unit": "s"},
    )
    backlog_wait_seconds: int = Field(
        default=3600,
        ge=5,
        description=(
            "How long the recovery sweep waits behind a queue a worker consumes for an analysis "
            "that makes no progress: past it the queue counts as not draining (a message that "
            "kills its worker process is redelivered forever) and the analysis is re-driven, "
            "then failed STALLED. At least lease_seconds; above the longest wait a big night's "
            "last ticker has in a healthy queue."
        ),
        json_schema_extra={"unit": "s"},
    )
    archive_after_seconds: int = Field(
        default=86400,
        ge=0,
        description=(
            "Beat archives analyses finished longer ago than this: each one's state, reports "
            "and tool-call rows move into one compressed row that the API, replay and the "
            'console read as before (finagent archive; docs/operations.md, "Archive"). '
            "0: never archive automatically."
        ),
        json_schema_extra={"unit": "s"},
    )

    @model_validator(mode="after")
    def _durability_arithmetic(self) -> DurabilitySettings:
        """The time limits, the visibility timeout and the lease must nest (docs/architecture.md,
        "Durability: the arithmetic"): soft limit < hard limit; a running stage or a retry's
        countdown never outlives the visibility timeout (else Redis redelivers a live message:
        docs/design.md, "Celery configuration"); a lease outlives a stage (else the sweep
        re-drives a live stage)."""
        if not self.task_soft_time_limit < self.task_time_limit:
            raise ValueError(
                "FINAGENT_DURABILITY_TASK_SOFT_TIME_LIMIT must be below FINAGENT_DURABILITY_TASK_TIME_LIMIT"
            )
        if not self.task_time_limit + self.task_retry_backoff_max < self.visibility_timeout:
            raise ValueError(
                "FINAGENT_DURABILITY_VISIBILITY_TIMEOUT must exceed FINAGENT_DURABILITY_TASK_TIME_LIMIT + "
                "FINAGENT_DURABILITY_TASK_RETRY_BACKOFF_MAX (a live message would be redelivered)"
            )
        if not self.task_time_limit < self.lease_seconds:
            raise ValueError(
                "FINAGENT_DURABILITY_LEASE_SECONDS must exceed FINAGENT_DURABILITY_TASK_TIME_LIMIT"
            )
        if not self.lease_seconds <= self.backlog_wait_seconds:
            raise ValueError(
                "FINAGENT_DURABILITY_BACKLOG_WAIT_SECONDS must be at least FINAGENT_DURABILITY_LEASE_SECONDS"
            )
        if not 2 * self.worker_heartbeat_seconds <= self.worker_dead_seconds:
            raise ValueError(
                "FINAGENT_DURABILITY_WORKER_DEAD_SECONDS must be at least twice"
                " FINAGENT_DURABILITY_WORKER_HEARTBEAT_SECONDS "
                "(one late heartbeat must not make a worker dead)"
            )
        return self
