"""The secret the masking tests configure, and the fixture that configures it (a pytest plugin
registered in tests/conftest.py)."""

from __future__ import annotations

import pytest

from core.settings import get_settings

#: An LLM API key as providers shape them (≥ 8 characters, so it is masked, docs/security.md).
KEY = "sk-TESTabc123def456ghi789"
#: What a provider answering 401 echoes back (OpenAI's wording).
ECHO = f"Incorrect API key provided: {KEY}"


@pytest.fixture
def secret(clean_settings: None, monkeypatch: pytest.MonkeyPatch) -> str:
    """``FINAGENT_LLM_API_KEY`` set to :data:`KEY` (settings re-read)."""
    monkeypatch.setenv("FINAGENT_LLM_API_KEY", KEY)
    get_settings.cache_clear()
    return KEY


def echoed_forms(key: str) -> dict[str, str]:
    """The forms of ``key`` a careless provider (or an attacker's page) may print, by name: the
    key, spaced out, base64 (standard alone, URL-safe inside a larger blob at byte offsets 1
    and 2), reversed, hex (lower and upper case), URL- and JSON-escaped, and its first and last
    12 characters. What the echoing test servers send back, and what the leak searches look for."""
    import base64
    import json
    from urllib.parse import quote

    raw = key.encode()
    return {
        "exact": key,
        "spaced": " ".join(key),
        "base64": base64.b64encode(raw).decode(),
        "base64 url-safe +1": base64.urlsafe_b64encode(b"\xfb" + raw + b"?").decode(),
        "base64 +2": base64.b64encode(b"\xfb\xff" + raw).decode(),
        "reversed": key[::-1],
        "hex": raw.hex(),
        "HEX": raw.hex().upper(),
        "url": quote(key, safe=""),
        "json": json.dumps(key)[1:-1],
        "first 12": key[:12],
        "last 12": key[-12:],
    }


def leaked_forms(key: str, text: str) -> list[str]:
    """The names of :func:`echoed_forms` of ``key`` found in ``text``: for a base64 form inside
    a blob, the part that depends on the key alone (``core.masking.base64_cores``), so the bytes
    around it do not hide a leak."""
    from core.masking import base64_cores

    found = [
        name for name, form in echoed_forms(key).items() if not name.startswith("base64") and form in text
    ]
    found += [f"base64 core {core}" for core in base64_cores(key) if core in text]
    return found
