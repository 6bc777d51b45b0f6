"""``core.masking``: the configured secret values, masked in any wording and encoding."""

from __future__ import annotations

import html
import json
import logging
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest

from core import masking
from core.masking import MASK, MIN_SECRET_LENGTH, SecretMasker, configured_secrets, url_passwords
from core.settings import Settings, get_settings
from tests.support.secrets import KEY

# every character that some encoding changes: URL (/ + & space), JSON (" \\ é), HTML (< > &)
ODD = 's3cr/t+k&y "q\\é<x>'


def test_a_key_is_masked_whatever_the_wording_around_it() -> None:
    masker = SecretMasker([KEY])
    echoed = f"Incorrect API key provided: {KEY}. You can find your API key at https://x/keys."
    assert (
        masker.mask_text(echoed)
        == "Incorrect API key provided: ***. You can find your API key at https://x/keys."
    )
    assert masker.mask_text(f"{KEY}{KEY}") == "******"


@pytest.mark.parametrize(
    "encode",
    [
        lambda s: s,
        lambda s: quote(s, safe=""),
        quote_plus,
        lambda s: json.dumps(s)[1:-1],
        lambda s: json.dumps(s, ensure_ascii=False)[1:-1],
        lambda s: repr(s)[1:-1],
        html.escape,
    ],
    ids=["raw", "url-quote", "url-quote-plus", "json-ascii", "json-utf8", "repr", "html"],
)
def test_every_encoding_of_a_secret_is_masked(encode) -> None:  # type: ignore[no-untyped-def]
    masker = SecretMasker([ODD])
    encoded = encode(ODD)
    assert masker.mask_text(f"before {encoded} after") == "before *** after"


def test_the_longer_of_two_overlapping_secrets_is_masked_whole() -> None:
    masker = SecretMasker(["abcdefgh", "abcdefgh-and-more"])
    assert masker.mask_text("x abcdefgh-and-more y abcdefgh z") == "x *** y *** z"


def test_short_values_are_not_masked() -> None:
    masker = SecretMasker(["pg", "guest", "x" * (MIN_SECRET_LENGTH - 1)])
    assert not masker
    assert masker.mask_text("pg guest xxxxxxx") == "pg guest xxxxxxx"
    assert SecretMasker(["y" * MIN_SECRET_LENGTH]).mask_text("a yyyyyyyy b") == "a *** b"


def test_nested_json_is_masked_in_values_and_keys_and_keeps_other_leaves() -> None:
    masker = SecretMasker([KEY])
    given = {
        "errors": [{"message": f"bad key {KEY}", "code": 401}],
        KEY: (1.5, None, True, [f"x{KEY}"]),
        "quote": {"price": 12345678},
    }
    masked = masker.mask(given)
    assert masked == {
        "errors": [{"message": "bad key ***", "code": 401}],
        MASK: (1.5, None, True, ["x***"]),
        "quote": {"price": 12345678},
    }
    assert given["errors"][0]["message"] == f"bad key {KEY}"  # the input is not modified


def test_a_value_without_a_secret_is_returned_itself() -> None:
    masker = SecretMasker([KEY])
    value = {"a": ["b", 1], "c": {"d": None}}
    assert masker.mask(value) is value
    assert SecretMasker().mask(value) is value
    text = "nothing here"
    assert masker.mask_text(text) is text


def test_a_numeric_looking_secret_only_changes_strings() -> None:
    # masking the JSON text would turn the number 12345678 into *** (invalid JSON): strings only
    masker = SecretMasker(["12345678"])
    assert masker.mask({"volume": 12345678, "note": "pin 12345678"}) == {
        "volume": 12345678,
        "note": "pin ***",
    }


def test_url_passwords_decoded_and_as_written() -> None:
    assert url_passwords("postgresql+psycopg://app:p%40ss-w0rd@db:5432/x") == ["p%40ss-w0rd", "p@ss-w0rd"]
    assert url_passwords("redis://:hunter22@cache:6379/0") == ["hunter22"]
    assert url_passwords("https://a.example/feed, https://u:feedpass1@b.example/rss") == ["feedpass1"]
    assert url_passwords("redis://cache:6379/0") == []
    assert url_passwords("amqp://guest@rabbit//") == []
    assert url_passwords("not a url: key@example") == []


def test_configured_secrets_cover_every_secret_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    router = tmp_path / "router.yaml"
    router.write_text(
        "model_list:\n"
        "  - model_name: local\n"
        "    litellm_params: {model: openai/a, api_base: 'http://u:routerbasepw@h/v1', api_key: no-key}\n"
        "  - model_name: big\n"
        "    litellm_params: {model: openai/b, api_key: sk-router-key-12345}\n"
        "  - model_name: hosted\n"
        "    litellm_params: {model: openai/c, api_key: os.environ/HOSTED_KEY_VAR}\n"
    )
    monkeypatch.setenv("HOSTED_KEY_VAR", "sk-hosted-from-env-1")
    monkeypatch.setenv("DEPLOY_KEY_VAR", "sk-deploy-from-env-2")
    settings = Settings(
        llm_api_key="sk-llm-key-123456",
        data_tavily_api_key="tvly-key-1234567",
        api_url_signing_key="u" * 32,
        broker_alpaca_api_key="AKIDALPACA123",
        broker_alpaca_secret_key="alpaca-secret-value",
        service_database_url="postgresql+psycopg://app:db%2Fpass1@db/x",
        service_broker_url="redis://default:brokerpass1@cache:6379/0",
        service_result_backend="redis://:backendpass1@cache:6379/1",
        api_session_redis_url="redis://:sessionpass1@cache:6379/2",
        llm_cooldown_redis_url="redis://:cooldownpass1@cache:6379/3",
        llm_router_file=router,
        llm_deployments=[
            {"model_name": "d1", "model": "openai/x", "api_key": "sk-deploy-direct-3"},
            {"model_name": "d2", "model": "openai/y", "api_key": "os.environ/DEPLOY_KEY_VAR"},
        ],
    )
    environ = {
        "OPENAI_API_KEY": "sk-openai-env-key-4",
        "AWS_SECRET_ACCESS_KEY": "aws-secret-access-5",
        "FLOWER_BASIC_AUTH": "admin:flowerpass1,ops:flowerpass2",
        "FLOWER_COOKIE_SECRET": "cookie-secret-6789",
        "HOME": "/root",
        "KEYWORDS": "earnings,guidance",
    }

    found = configured_secrets(settings, environ=environ)

    assert {s.value for s in found} == {
        "sk-llm-key-123456",
        "tvly-key-1234567",
        "u" * 32,
        "AKIDALPACA123",
        "alpaca-secret-value",
        "db%2Fpass1",
        "db/pass1",
        "brokerpass1",
        "backendpass1",
        "sessionpass1",
        "cooldownpass1",
        "routerbasepw",
        "no-key",  # configured, so listed; too short to be masked (warned about)
        "sk-router-key-12345",
        "sk-hosted-from-env-1",
        "sk-deploy-direct-3",
        "sk-deploy-from-env-2",
        "sk-openai-env-key-4",
        "aws-secret-access-5",
        "flowerpass1",
        "flowerpass2",
        "cookie-secret-6789",
    }
    # a source names the setting, never the value (it is logged in the short-value warning)
    assert all(s.value not in s.source and s.value not in repr(s) for s in found)
    assert {s.source for s in found} >= {
        "FINAGENT_LLM_API_KEY",
        "FINAGENT_SERVICE_BROKER_URL (password)",
        "OPENAI_API_KEY",
    }


def test_a_toml_router_file_and_a_broken_one(tmp_path: Path) -> None:
    toml = tmp_path / "router.toml"
    toml.write_text(
        '[[model_list]]\nmodel_name = "a"\n'
        '[model_list.litellm_params]\nmodel = "openai/a"\napi_key = "sk-toml-key-123"\n'
    )
    assert [s.value for s in masking.router_file_keys(toml)] == ["sk-toml-key-123"]
    broken = tmp_path / "router.yaml"
    broken.write_text("model_list: [unclosed")
    assert masking.router_file_keys(broken) == []  # agents.llm.config reports the broken file
    assert masking.router_file_keys(tmp_path / "missing.yaml") == []


def test_the_process_masker_follows_the_settings_and_warns_about_short_ones(
    clean_settings: None, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    assert masking.mask_text(f"no secret configured {KEY}") == f"no secret configured {KEY}"
    monkeypatch.setenv("FINAGENT_LLM_API_KEY", KEY)
    monkeypatch.setenv("FINAGENT_BROKER_ALPACA_API_KEY", "AKq7z")
    get_settings.cache_clear()
    with caplog.at_level(logging.WARNING, logger="finagent.secrets"):
        assert masking.mask_text(f"echo {KEY}") == "echo ***"
        assert masking.mask({"e": [f"echo {KEY}"]}) == {"e": ["echo ***"]}
    warnings = [r.getMessage() for r in caplog.records if r.name == "finagent.secrets"]
    assert (
        len(warnings) == 1 and "FINAGENT_BROKER_ALPACA_API_KEY" in warnings[0] and "AKq7z" not in warnings[0]
    )
    assert masking.mask_text("AKq7z stays") == "AKq7z stays"


def test_registered_values_are_masked_from_then_on(clean_settings: None) -> None:
    assert masking.mask_text("pw flower-pass-987") == "pw flower-pass-987"
    masking.register_secrets("flower --basic-auth", ["flower-pass-987"])
    assert masking.mask_text("pw flower-pass-987") == "pw ***"


def test_a_short_value_is_warned_about_once_per_process(
    clean_settings: None, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("FINAGENT_LLM_API_KEY", "sk-7zq")
    get_settings.cache_clear()
    with caplog.at_level(logging.WARNING, logger="finagent.secrets"):
        masking.mask_text("x")
        get_settings.cache_clear()  # the settings change: the masker is built again
        masking.mask_text("x")
        masking.register_secrets("LLM deployment api_key", ["sk-7zq"])  # the same value, handed to LiteLLM
        masking.mask_text("x")
    warned = [r.getMessage() for r in caplog.records if r.name == "finagent.secrets"]
    assert len(warned) == 1 and "FINAGENT_LLM_API_KEY" in warned[0]
