"""Requests without a valid key: a limit per client address, and the address itself.

Anyone who can reach the gateway can send requests without a key, or with a wrong one. Each
costs a key lookup and, when it is mutating, an audit write (OWASP API Security Top 10 2023,
API4 "Unrestricted Resource Consumption"). So:

* :func:`charge_failed_auth`: every request whose key is missing, malformed, unknown or revoked
  (or whose signed link is wrong or expired) takes a token from its client address's bucket
  (``api.failed_auth_per_minute`` a minute, burst the same; the Redis Lua bucket of
  ``agents.data.market.shared``, shared by every API process, else per process). An empty bucket
  turns the 401/403 into a 429 with ``Retry-After``. A request with a valid key from the same
  address is never refused by it: a client behind a shared address is not locked out by
  someone else's mistakes.
* The audit log counts such requests in one row per address, status and window
  (``apps.api.audit``), so a flood cannot grow the table.

The client address is the connection's peer as the ASGI server reports it. Behind a reverse
proxy that is the proxy, unless uvicorn trusts the proxy's ``X-Forwarded-For``: uvicorn does for
peers listed in ``FORWARDED_ALLOW_IPS`` (default ``127.0.0.1``), so set it to the proxy's address
(docs/security.md, "Quotas"). IPv6 clients are keyed by their /64 network: one host commonly
holds a whole /64, so per-address keys would let it take a fresh bucket per request.
"""

from __future__ import annotations

import ipaddress
import math
from typing import Final

from starlette.types import Scope

from agents.data.market.shared import take_token
from apps.metering import QuotaExceededError
from core.settings import Settings

#: The key of requests whose transport reports no peer (a test client, a Unix socket).
UNKNOWN_ADDRESS: Final = "unknown"
#: Bits of an IPv6 address that name its client (RFC 4291's interface identifier is the rest).
IPV6_CLIENT_PREFIX: Final = 64


def client_address(scope: Scope) -> str:
    """The client address of an ASGI ``scope``: its IPv4 address, its IPv6 /64 network
    (``2001:db8:1:2::/64``; an IPv4-mapped IPv6 address as the IPv4 one), the host string as
    given when it is not an IP address, or :data:`UNKNOWN_ADDRESS` without a peer."""
    client = scope.get("client")
    host = client[0] if client else None
    if not host:
        return UNKNOWN_ADDRESS
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return str(host)[:100]
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.ip_network(f"{ip}/{IPV6_CLIENT_PREFIX}", strict=False))
    return str(ip)


def charge_failed_auth(*, address: str, settings: Settings) -> None:
    """Take one token of ``address``'s failed-authentication bucket (module docstring).

    Raises:
        QuotaExceededError: the bucket is empty (HTTP 429; ``Retry-After`` the seconds to the
            next token).
        agents.data.market.shared.SharedStateUnavailableError: the shared Redis did not answer.
    """
    per_minute = settings.api.failed_auth_per_minute
    wait = take_token(
        name=f"api-failed-auth:{address}",
        rate=per_minute / 60.0,
        burst=per_minute,
        redis_url=settings.service.shared_redis_url,
    )
    if wait > 0:
        raise QuotaExceededError(
            f"too many requests without a valid API key from {address} ({per_minute} a minute); "
            f"retry in {math.ceil(wait)} s with a valid X-API-Key",
            retry_after=math.ceil(wait),
        )
