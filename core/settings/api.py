"""The ``api`` group of the settings (``Settings.api``); variables stay ``FINAGENT_<FIELD>``."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, SecretStr


class ApiSettings(BaseModel):
    """The HTTP gateway: bind address, body size, health, sessions, idempotency, per-key
    quotas, audit and signed chart links.
    """

    model_config = ConfigDict(extra="forbid", validate_default=True)

    # Operations: HTTP gateway, sessions, watchlists, beat.
    host: str = Field(default="127.0.0.1", description="`finagent serve` bind address.")
    port: int = Field(
        default=8000, ge=1, le=65535, description="`finagent serve` port.", json_schema_extra={"unit": "port"}
    )
    max_body_bytes: int = Field(
        default=1_000_000,
        ge=1024,
        description="Largest request body the gateway reads (bytes); larger → 413.",
        json_schema_extra={"unit": "bytes"},
    )
    health_timeout: float = Field(
        default=2.0,
        gt=0,
        description="Seconds GET /health waits for workers' replies and its echo task.",
        json_schema_extra={"unit": "s"},
    )
    session_ttl: int = Field(
        default=3600,
        ge=1,
        description="Seconds a conversation session lives after its last request.",
        json_schema_extra={"unit": "s"},
    )
    session_redis_url: str | None = Field(
        default=None,
        description="Redis for sessions. Unset: the broker if Redis, else in memory.",
        json_schema_extra={"unit": "URL"},
    )
    idempotency_ttl: int = Field(
        default=86400,
        ge=60,
        description="Seconds an Idempotency-Key stays bound to its analysis (24 h, as Stripe's); after "
        "that the same key starts a new analysis.",
        json_schema_extra={"unit": "s"},
    )
    # HTTP API quotas per key (apps/api/quotas.py). A deterministic analysis costs about a
    # CPU-second of a worker and an LLM one up to llm_budget_usd: 30 a minute keeps one key from
    # filling the queues, and 10 in flight is more than a person or a script waits on at once.
    analyses_per_minute: int = Field(
        default=30,
        ge=1,
        description="Analyses one API key may start a minute (token bucket; burst = rate).",
        json_schema_extra={"unit": "analyses/min"},
    )
    max_in_flight: int = Field(
        default=10,
        ge=1,
        description="Unfinished analyses one API key may have at once; more → 429.",
        json_schema_extra={"unit": "analyses"},
    )
    # Requests whose key is missing, malformed, unknown or revoked, per client address: a
    # client that mistyped its key needs a few; a scanner gets 429 and costs one audit row a
    # window (apps/api/abuse.py).
    failed_auth_per_minute: int = Field(
        default=10,
        ge=1,
        description="Requests with a missing or invalid key one client address may make a minute "
        "(token bucket; burst = rate); more → 429.",
        json_schema_extra={"unit": "requests/min"},
    )
    audit_anonymous_window_seconds: int = Field(
        default=60,
        ge=1,
        le=86_400,
        description="Mutating requests without a valid key are audited as one row per client "
        "address, status and window of this many seconds, with a count.",
        json_schema_extra={"unit": "s"},
    )
    url_signing_key: SecretStr | None = Field(
        default=None,
        description="Secret (≥ 32 characters) that signs chart links in digests served by the gateway, "
        "so a browser can load them as <img> without X-API-Key; unset → links need the header. Never logged.",
    )
    console_secret: SecretStr | None = Field(
        default=None,
        description="Secret (≥ 32 characters) that signs the web console's session cookies (/console); "
        "unset → a random one per process (sessions end when it restarts; set it when several "
        "gateway processes serve the console). Never logged.",
    )
    console_session_ttl: int = Field(
        default=8 * 3600,
        ge=60,
        le=30 * 86400,
        description="Seconds a web console sign-in lasts at most (the session ends then, however active).",
        json_schema_extra={"unit": "s"},
    )
    # OWASP's Session Management Cheat Sheet: 15-30 minutes of idle time for most applications.
    console_idle_timeout: int = Field(
        default=30 * 60,
        ge=60,
        le=30 * 86400,
        description="Seconds a web console session may go without a request before it ends "
        "(the next page asks to sign in again).",
        json_schema_extra={"unit": "s"},
    )
    console_allowed_origins: str = Field(
        default="",
        description="Comma-separated origins (scheme://host[:port]) besides the console's own from "
        "which its forms may be posted (the Origin, else Referer, of every console POST is checked); "
        "e.g. the public address of a proxy that rewrites Host.",
    )
    # A signed link is a bearer credential for one chart: a week covers a digest read late, and
    # 90 days caps how long a leaked link works.
    signed_url_ttl: int = Field(
        default=7 * 86400,
        ge=60,
        le=90 * 86400,
        description="Seconds a signed chart link stays valid.",
        json_schema_extra={"unit": "s"},
    )
