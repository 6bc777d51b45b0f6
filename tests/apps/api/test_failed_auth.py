"""Requests without a valid key: limited per client address (429 + Retry-After) and counted in
one audit row per address, status and window instead of one row each. Real uvicorn gateway on
127.0.0.1; uvicorn trusts ``X-Forwarded-For`` from 127.0.0.1 (its default
``FORWARDED_ALLOW_IPS``), which stands in for the reverse proxy and gives each test client its
own address."""

from __future__ import annotations

import json
import random
import uuid

import httpx
import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from apps.api.abuse import client_address
from apps.api.auth import create_key
from core.settings import Settings
from db import ops_repo
from db.engine import get_engine
from tests.apps.api.conftest import Gateway


def _address() -> str:
    """A fresh client address (RFC 2544's benchmark range, 198.18.0.0/15): the per-address
    buckets live on in this process, so each test takes addresses no other test used."""
    n = random.randrange(1, 2**17 - 1)
    return f"198.{18 + (n >> 16)}.{(n >> 8) & 255}.{n & 255}"


def _audit(settings: Settings) -> list[dict[str, object]]:
    return ops_repo.list_audit(engine=get_engine(settings.service.effective_database_url), limit=1000)


def test_failed_auth_is_limited_per_address_and_a_valid_key_still_passes(make_gateway: Gateway) -> None:
    base, settings = make_gateway(api_failed_auth_per_minute=5)
    key = create_key(name="alice", tenant="acme", settings=settings)
    addr, elsewhere, linker = _address(), _address(), _address()
    scanner = {"X-Forwarded-For": addr}
    with httpx.Client(base_url=base, timeout=60) as c:
        answers = [
            c.delete(f"/watchlists/w{i}", headers={**scanner, "X-API-Key": "fa_000000000000_" + "x" * 30})
            if i % 2
            else c.delete(f"/watchlists/w{i}", headers=scanner)
            for i in range(40)
        ]
        statuses = [a.status_code for a in answers]
        # five failures a minute: missing keys (401) and unknown keys (403) alike, then 429
        assert statuses[:5] == [401, 403, 401, 403, 401] and statuses[5:] == [429] * 35
        refused = answers[-1]
        assert 1 <= int(refused.headers["Retry-After"]) <= 12
        assert f"too many requests without a valid API key from {addr}" in refused.json()["detail"]
        # a valid key from the same address is not refused by someone else's failures
        ok = c.post(
            "/watchlists", json={"name": "mine", "tickers": ["AAPL"]}, headers={**scanner, "X-API-Key": key}
        )
        assert ok.status_code == 201, ok.text
        # another address has its own allowance
        other = c.delete("/watchlists/w", headers={"X-Forwarded-For": elsewhere})
        assert other.status_code == 401
        # signed links count too (here signing is off: a well-formed link is refused 401)
        chart = "/analyses/00000000-0000-0000-0000-000000000000/chart.png"
        link_params = {"expires": "1", "sig": "0" * 64}
        for _ in range(5):
            c.get(chart, params=link_params, headers={"X-Forwarded-For": linker})
        link = c.get(chart, params=link_params, headers={"X-Forwarded-For": linker})
        assert link.status_code == 429


def test_anonymous_requests_are_counted_not_listed(make_gateway: Gateway) -> None:
    base, settings = make_gateway(api_failed_auth_per_minute=3, api_audit_anonymous_window_seconds=3600)
    key = create_key(name="alice", tenant="acme", settings=settings)
    secret = "fa_000000000000_" + uuid.uuid4().hex
    addr, elsewhere = _address(), _address()
    with httpx.Client(base_url=base, timeout=60) as c:
        for i in range(60):  # every path another object, some routes that do not exist
            path = f"/watchlists/w{i}" if i % 3 else f"/no-such-route/{uuid.uuid4().hex}"
            c.delete(path, headers={"X-Forwarded-For": addr, "X-API-Key": secret})
        c.post(
            "/watchlists",
            json={"name": "x", "tickers": ["AAPL"]},
            headers={"X-Forwarded-For": elsewhere},
        )
        assert (
            c.post(
                "/watchlists", json={"name": "mine", "tickers": ["AAPL"]}, headers={"X-API-Key": key}
            ).status_code
            == 201
        )
    rows = _audit(settings)
    anonymous = [r for r in rows if r["api_key_id"] is None]
    by_address: dict[object, int] = {}
    for r in anonymous:
        assert isinstance(r["requests"], int)
        by_address[r["client_address"]] = by_address.get(r["client_address"], 0) + r["requests"]
    # every request is counted, in a few rows: one per address, status and hour (the test may
    # straddle an hour: then twice as many)
    assert by_address == {addr: 60, elsewhere: 1}
    statuses = {(r["client_address"], r["status_code"]) for r in anonymous}
    assert statuses == {
        (addr, 403),
        (addr, 404),
        (addr, 429),
        (elsewhere, 401),
    }
    assert len(anonymous) <= 2 * len(statuses)
    # requests with a key keep their own row, with the client's address
    (mine,) = [r for r in rows if r["api_key_id"] is not None]
    assert (mine["key_name"], mine["requests"], mine["client_address"]) == ("alice", 1, "127.0.0.1")
    # no row holds the key that was tried
    with get_engine(settings.service.effective_database_url).connect() as conn:
        dump = json.dumps(
            [dict(r._mapping) for r in conn.execute(sa.text("SELECT * FROM audit_log"))], default=str
        )
    assert secret not in dump and secret.split("_", 2)[2] not in dump


def test_client_address_keys_ipv6_by_its_network() -> None:
    assert client_address({"client": ("2001:db8:1:2:aaaa::5", 4000)}) == "2001:db8:1:2::/64"
    assert client_address({"client": ("2001:db8:1:2:ffff::9", 4000)}) == "2001:db8:1:2::/64"
    assert client_address({"client": ("::ffff:192.0.2.1", 4000)}) == "192.0.2.1"
    assert client_address({"client": ("192.0.2.1", 4000)}) == "192.0.2.1"
    assert client_address({"client": None}) == client_address({}) == "unknown"


def test_finagent_audit_shows_the_count_and_address(
    make_gateway: Gateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    from apps.cli import main
    from core.settings import get_settings

    base, settings = make_gateway(api_audit_anonymous_window_seconds=3600)
    addr = _address()
    for _ in range(4):
        httpx.delete(f"{base}/watchlists/w", headers={"X-Forwarded-For": addr}, timeout=60)
    monkeypatch.setenv("FINAGENT_SERVICE_DATABASE_URL", settings.service.effective_database_url)
    get_settings.cache_clear()
    try:
        result = CliRunner().invoke(main, ["audit"])
    finally:
        get_settings.cache_clear()
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert sum(int(line.split("×")[1].split()[0]) if "×" in line else 1 for line in lines) == 4
    assert all(
        line.endswith(f"\t{addr}") and "(no valid key)" in line and "\t401 refused\t" in line
        for line in lines
    )
