"""API keys: shown once, stored hashed, 401 for none and 403 for unknown or revoked keys."""

from __future__ import annotations

from pathlib import Path

import pytest

from apps.api.auth import AuthError, authenticate, create_key, hash_key
from core.settings import Settings
from db import ops_repo
from db.engine import get_engine
from db.migrate import upgrade


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    url = f"sqlite:///{tmp_path / 'ops.sqlite3'}"
    upgrade(url=url)
    return Settings(service_database_url=url, service_state_dir=tmp_path)


def test_key_is_stored_hashed_and_authenticates(settings: Settings) -> None:
    token = create_key(name="ci", settings=settings)
    assert token.startswith("fa_")
    engine = get_engine(settings.service.effective_database_url)
    row = ops_repo.get_api_key(engine=engine, key_id=token.split("_")[1])
    assert row is not None and row["key_hash"] == hash_key(token) and token not in str(row)
    assert authenticate(token=token, settings=settings).name == "ci"


@pytest.mark.parametrize("token", [None, ""])
def test_missing_key_is_401(settings: Settings, token: str | None) -> None:
    with pytest.raises(AuthError) as err:
        authenticate(token=token, settings=settings)
    assert err.value.status_code == 401


def test_unknown_tampered_and_revoked_keys_are_403(settings: Settings) -> None:
    token = create_key(name="ci", settings=settings)
    for bad in ["nonsense", token[:-1] + ("A" if token[-1] != "A" else "B"), "fa_000000000000_" + "x" * 43]:
        with pytest.raises(AuthError) as err:
            authenticate(token=bad, settings=settings)
        assert err.value.status_code == 403 and bad not in str(err.value)
    ops_repo.revoke_api_key(engine=get_engine(settings.service.effective_database_url), name="ci")
    with pytest.raises(AuthError, match="revoked") as err:
        authenticate(token=token, settings=settings)
    assert err.value.status_code == 403


def test_signed_links_bind_path_and_expiry() -> None:
    from apps.api.auth import sign_path, signing_enabled, verify_signed_path

    settings = Settings(api_url_signing_key="k" * 32, api_signed_url_ttl=3600)
    assert signing_enabled(settings) and not signing_enabled(Settings(api_url_signing_key="short"))
    link = sign_path("/analyses/a/chart.png", settings=settings, now=1_000_000)
    path, query = link.split("?")
    params = dict(p.split("=") for p in query.split("&"))
    assert params["expires"] == "1003600" and len(params["sig"]) == 64
    verify_signed_path(path, **params, settings=settings, now=1_003_599)  # valid until expiry
    cases = [
        ("/analyses/b/chart.png", params, 1_000_001, "invalid signed link"),  # another chart
        (path, {**params, "expires": "1999999"}, 1_000_001, "invalid signed link"),  # edited expiry
        (path, params, 1_003_601, "expired"),
        (path, {**params, "expires": "-1"}, 1_000_001, "invalid signed link"),
    ]
    for p, prm, now, message in cases:
        with pytest.raises(AuthError, match=message) as err:
            verify_signed_path(p, **prm, settings=settings, now=now)
        assert err.value.status_code == 403
    other_key = Settings(api_url_signing_key="x" * 32)
    with pytest.raises(AuthError) as err:
        verify_signed_path(path, **params, settings=other_key, now=1_000_001)
    assert err.value.status_code == 403
    with pytest.raises(AuthError) as err:  # signing not configured: links are not trusted
        verify_signed_path(path, **params, settings=Settings(), now=1_000_001)
    assert err.value.status_code == 401
    with pytest.raises(AuthError) as err:
        sign_path(path, settings=Settings())
    assert err.value.status_code == 401
