"""``finagent apikey`` (HTTP API keys, stored hashed) and ``finagent audit`` (the API's audit
log)."""

from __future__ import annotations

import json

import click

from apps.api.auth import create_key, rotate_key
from apps.cli.common import EXIT_INVALID, err, fail, load_settings
from core.settings import Settings
from core.tenancy import parse_scopes
from db.engine import get_engine
from db.ops_repo import DuplicateNameError, find_api_key, list_api_keys, list_audit, revoke_api_key
from pipeline.database import prepare_database


@click.group()
def apikey() -> None:
    """HTTP API keys (stored hashed; a key is shown once, at creation)."""


@apikey.command("create", short_help="Create a key and print it (shown once)")
@click.argument("name")
@click.option(
    "--tenant", default="default", show_default=True, help="Tenant whose objects the key sees and owns."
)
@click.option(
    "--scopes",
    default=None,
    help="Comma-separated: read, analyze, watchlists, admin, operator (default read,analyze,watchlists). "
    "operator: the cross-tenant scorecard (GET /scorecard?all_tenants=true); give it to the "
    "deployment's operator only.",
)
@click.option(
    "--rotate",
    is_flag=True,
    help="When an active key named NAME exists (same tenant and scopes), give it a new secret "
    "instead of refusing: the command then prints a working key every time it runs.",
)
def apikey_create(name: str, tenant: str, scopes: str | None, rotate: bool) -> None:
    """Create a key NAME and print it (the only time it is shown).

    Exit 2 when the name is taken (unless --rotate), or for a bad tenant or scope."""
    settings = load_settings()
    prepare_database(settings=settings)
    try:
        granted = parse_scopes(scopes)
        token = create_key(name=name, settings=settings, tenant=tenant, scopes=granted)
    except DuplicateNameError as exc:
        if not rotate:
            fail(f"{exc} (--rotate gives it a new secret; `finagent apikey list` shows it)", EXIT_INVALID)
        _rotate(name, settings=settings, tenant=tenant, scopes=granted)
        return
    except ValueError as exc:
        fail(str(exc), EXIT_INVALID)
    click.echo(token)
    err(
        f"API key {name!r} of tenant {tenant!r} (scopes {','.join(granted)}) created; store it now, "
        "it cannot be shown again (send it as X-API-Key)"
    )


def _rotate(
    name: str, *, settings: Settings, tenant: str | None = None, scopes: tuple[str, ...] | None = None
) -> None:
    """Print a new secret for key ``name`` (:func:`apps.api.auth.rotate_key`); with
    ``tenant``/``scopes``, only when the key has exactly those (else exit 2: the command asked
    for another key than the one that exists)."""
    found = find_api_key(engine=get_engine(settings.service.effective_database_url), name=name)
    asked = (tenant, ",".join(scopes)) if tenant is not None and scopes is not None else None
    if found is not None and asked is not None and (found["tenant"], found["scopes"]) != asked:
        fail(
            f"the API key {name!r} exists with tenant {found['tenant']!r} and scopes {found['scopes']}, "
            "not the ones asked: choose another name, or `finagent apikey rotate` it as it is",
            EXIT_INVALID,
        )
    try:
        token, row = rotate_key(name=name, settings=settings)
    except (KeyError, ValueError) as exc:
        fail(str(exc.args[0]) if isinstance(exc, KeyError) else str(exc), EXIT_INVALID)
    click.echo(token)
    err(
        f"API key {name!r} of tenant {row['tenant']!r} (scopes {row['scopes']}) has a new secret; the old "
        "one no longer works and its console sessions ended; store this one now (send it as X-API-Key)"
    )


@apikey.command("rotate", short_help="Give a key a new secret and print it")
@click.argument("name")
def apikey_rotate(name: str) -> None:
    """Give the key NAME a new secret and print it (the only time it is shown): same public id,
    tenant and scopes; the old secret is refused from then on and its console sessions end.
    Exit 2 for an unknown or revoked key."""
    settings = load_settings()
    prepare_database(settings=settings)
    _rotate(name, settings=settings)


@apikey.command("list", short_help="List keys (never the keys themselves)")
def apikey_list() -> None:
    """List keys (name, id, tenant, scopes, created, revoked); never the keys themselves."""
    settings = load_settings()
    prepare_database(settings=settings)
    for row in list_api_keys(engine=get_engine(settings.service.effective_database_url)):
        revoked = f"revoked {row['revoked_at']:%Y-%m-%d %H:%M}" if row["revoked_at"] else "active"
        click.echo(
            f"{row['name']}\tfa_{row['key_id']}_…\t{row['tenant']}\t{row['scopes']}\t"
            f"{row['created_at']:%Y-%m-%d %H:%M}\t{revoked}"
        )


@apikey.command("revoke", short_help="Revoke a key")
@click.argument("name")
def apikey_revoke(name: str) -> None:
    """Revoke key NAME (requests with it get 403 from then on)."""
    if not revoke_api_key(engine=get_engine(load_settings().service.effective_database_url), name=name):
        fail(f"no active API key named {name!r}", EXIT_INVALID)
    err(f"API key {name!r} revoked")


@click.command("audit")
@click.option("--tenant", default=None, help="Only this tenant's rows (default: every tenant).")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 1000))
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
def audit(tenant: str | None, limit: int, as_json: bool) -> None:
    """The HTTP API's audit log, newest first: one row per mutating request with a key (who =
    key name and public id, what, object, status, request id, client address); requests without
    a valid key as one row per address, status and window with their count (``×N``); never a
    key or a secret."""
    settings = load_settings()
    prepare_database(settings=settings)
    rows = list_audit(engine=get_engine(settings.service.effective_database_url), tenant=tenant, limit=limit)
    for row in rows:
        if as_json:
            click.echo(json.dumps(row, default=str, sort_keys=True))
            continue
        who = f"{row['key_name']} (fa_{row['api_key_id']}_…)" if row["api_key_id"] else "(no valid key)"
        if row["requests"] > 1:
            who += f" ×{row['requests']} until {row['last_at']:%H:%M:%S}"
        click.echo(
            f"{row['at']:%Y-%m-%d %H:%M:%S}\t{row['tenant'] or '-'}\t{who}\t{row['what']}\t"
            f"{row['object_id'] or '-'}\t{row['status_code']} {row['outcome']}\t{row['request_id']}\t"
            f"{row['client_address'] or '-'}"
        )
