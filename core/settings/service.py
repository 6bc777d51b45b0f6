"""The ``service`` group of the settings (``Settings.service``); variables stay ``FINAGENT_<FIELD>``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

#: Where embedded mode keeps its SQLite file unless FINAGENT_SERVICE_STATE_DIR says otherwise (XDG state).
DEFAULT_STATE_DIR = Path(os.environ.get("XDG_STATE_HOME", Path.home() / ".local" / "state")) / "finagent"


class ServiceSettings(BaseModel):
    """Where the product runs: broker, result backend, database, state folder, logs, the
    CLI's wait and the operator ports (Flower, beat lock).
    """

    model_config = ConfigDict(extra="forbid", validate_default=True)

    broker_url: str | None = Field(
        default=None,
        description="Celery broker URL (redis://..., amqp://...). Unset: embedded mode.",
        json_schema_extra={"unit": "URL"},
    )
    result_backend: str | None = Field(
        default=None,
        description="Celery result backend URL. Unset: the broker URL if Redis, else none.",
        json_schema_extra={"unit": "URL"},
    )
    database_url: str | None = Field(
        default=None,
        description="SQLAlchemy URL (postgresql+psycopg://...). Unset: a SQLite file in the state dir.",
        json_schema_extra={"unit": "URL"},
    )
    state_dir: Path = Field(
        default=DEFAULT_STATE_DIR,
        description="Where embedded mode keeps its SQLite file.",
        json_schema_extra={"unit": "path"},
    )
    log_level: str = Field(default="INFO", description="Level of the JSON logs (DEBUG, INFO, WARNING).")
    wait_poll_interval: float = Field(
        default=0.05,
        gt=0,
        description="Seconds between status polls of --wait.",
        json_schema_extra={"unit": "s"},
    )
    wait_timeout: float = Field(
        default=600.0,
        gt=0,
        description="Seconds `finagent analyze` waits for a report.",
        json_schema_extra={"unit": "s"},
    )
    flower_port: int = Field(
        default=5555,
        ge=1,
        le=65535,
        description="`finagent flower` port.",
        json_schema_extra={"unit": "port"},
    )
    beat_lock_timeout: int = Field(
        default=30,
        ge=5,
        description="redbeat lock TTL (s): a dead beat's standby takes over after it.",
        json_schema_extra={"unit": "s"},
    )

    @property
    def mode(self) -> Literal["embedded", "service"]:
        """``service`` when a broker URL is configured, else ``embedded``."""
        return "service" if self.broker_url else "embedded"

    @property
    def effective_database_url(self) -> str:
        """The configured database URL, or the embedded SQLite file under ``state_dir``."""
        if self.database_url:
            return self.database_url
        return f"sqlite:///{self.state_dir / 'finagent.sqlite3'}"

    @property
    def shared_redis_url(self) -> str | None:
        """Redis for state shared by workers (bar cache, rate limits): the broker if it is Redis."""
        if self.broker_url and self.broker_url.startswith(("redis://", "rediss://")):
            return self.broker_url
        return None

    @property
    def effective_result_backend(self) -> str | None:
        """Result backend: explicit setting, else the broker when it is Redis, else none."""
        if self.result_backend:
            return self.result_backend
        if self.broker_url and self.broker_url.startswith(("redis://", "rediss://")):
            return self.broker_url
        return None
