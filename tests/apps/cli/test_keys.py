"""``finagent apikey create --rotate`` and ``apikey rotate``: a re-run of the documented recipe
gives a working key, and a rotation keeps the key but refuses its old secret."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from apps.api.auth import AuthError, authenticate
from apps.cli import main
from core.settings import get_settings

pytestmark = pytest.mark.usefixtures("clean_settings")


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner(mix_stderr=False).invoke(main, ["apikey", *args])
    return result.exit_code, result.stdout.strip(), result.stderr


def test_a_taken_name_is_refused_unless_rotated(tmp_path: Path) -> None:
    code, first, _ = _run("create", "me")
    assert code == 0 and first.startswith("fa_")
    code, out, err = _run("create", "me")
    assert code == 2 and out == "" and "already exists" in err and "--rotate" in err
    code, second, err = _run("create", "me", "--rotate")
    assert code == 0 and second.startswith("fa_") and second != first and "new secret" in err
    # the same key (public id, tenant, scopes), the old secret refused
    assert first.split("_")[1] == second.split("_")[1]
    settings = get_settings()
    assert authenticate(token=second, settings=settings).scopes == ("read", "analyze", "watchlists")
    with pytest.raises(AuthError):
        authenticate(token=first, settings=settings)


def test_rotate_refuses_another_key_than_asked_an_unknown_or_a_revoked_one() -> None:
    assert _run("create", "ops", "--scopes", "read")[0] == 0
    code, out, err = _run("create", "ops", "--scopes", "read,admin", "--rotate")
    assert code == 2 and out == "" and "not the ones asked" in err
    code, _, err = _run("rotate", "nobody")
    assert code == 2 and "no API key named 'nobody'" in err
    assert _run("revoke", "ops")[0] == 0
    code, out, err = _run("rotate", "ops")
    assert code == 2 and out == "" and "revoked" in err
