"""No configured secret anywhere, when the services the product talks to echo the keys they
were sent: a real worker (prefork), Flower and the HTTP gateway on Redis and PostgreSQL.

The LLM server quotes the key of each request in its own words ("Incorrect API key provided:
<key>", OpenAI's 401 wording: no ``api_key=`` or ``Bearer`` for the pattern redaction to find),
and then in every other form (spaced out, base64 at each alignment, reversed, hex, escaped, its
first and last 12 characters: ``tests.support.secrets.echoed_forms``);
the router file's deployment answers 401, the fallback (``FINAGENT_LLM_API_KEY``) 500 until its
retries are spent. The market-data source times out on IBM quoting the Alpaca key id and secret,
until the stage's Celery retries are spent and the analysis fails. Every secret setting is set,
the database and broker URLs carry passwords. Then each secret is searched in every column of
every table (pg_dump and a query per column), the worker's, Flower's and the gateway's logs,
Flower's ``/api/tasks``, every key of the Redis database (broker and result backend),
``GET /analyses/{id}`` with the owner's key, a read-only key of the same tenant and another
tenant's key, the console's pages of the analyses, the digest of a watchlist run in its three
formats, and ``finagent show``: in every form (``tests.support.secrets.leaked_forms``).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import urllib.request
import uuid
from typing import Any
from urllib.parse import urlsplit

import redis
import sqlalchemy as sa
from sqlalchemy.engine import make_url

from db.engine import get_engine
from db.redact import redact
from tests.integration.conftest import Service
from tests.integration.ops_support import Http, poll, start_process, stop_process, wait_http
from tests.llm.responders import KeyEcho
from tests.llm.server import ScriptedLLM
from tests.support.private_services import free_port
from tests.support.secrets import leaked_forms

RUN_DATE = "2012-06-29"  # inside the embedded dataset (AAPL, IBM)
MASKED_ECHO = "Incorrect API key provided: ***"


def _secrets() -> dict[str, str]:
    """Fresh values for every secret setting (unique per run, so no text holds one by chance)."""
    tag = uuid.uuid4().hex
    return {
        "llm_key": f"sk-TESTabc{tag[:20]}",
        "router_key": f"sk-ROUTERkey{tag[:18]}",
        "alpaca_id": f"AKTEST{tag[:14].upper()}",
        "alpaca_secret": f"alpacaSecret{tag[:20]}",
        "signing_key": f"signing-{tag}",
        "db_password": f"pgPassword{tag[:12]}",
        "broker_password": f"brokerPassword{tag[:12]}",
    }


def _database_dump(url: str) -> str:
    """Every column of every table as text: ``pg_dump --data-only`` (when installed) and one
    ``SELECT col::text`` per column of every table of the public schema."""
    parts: list[str] = []
    parsed = make_url(url)
    if shutil.which("pg_dump"):
        libpq = parsed.set(drivername="postgresql").render_as_string(hide_password=False)
        dumped = subprocess.run(
            ["pg_dump", "--data-only", "--no-owner", libpq], capture_output=True, text=True, check=True
        )
        parts.append(dumped.stdout)
    with get_engine(url).connect() as conn:
        columns = conn.execute(
            sa.text(
                "SELECT table_name, column_name FROM information_schema.columns "
                "WHERE table_schema = 'public' ORDER BY table_name, ordinal_position"
            )
        ).all()
        for table, column in columns:
            values = conn.execute(sa.text(f'SELECT "{column}"::text FROM "{table}"')).scalars()
            parts.extend(v for v in values if v is not None)
    return "\n".join(parts)


def _redis_dump(url: str) -> str:
    """Every key and value of the Redis database (broker queues, result backend, redbeat)."""
    client = redis.Redis.from_url(url)
    parts: list[str] = []
    for key in client.scan_iter(count=500):
        kind = client.type(key).decode()
        value: Any
        if kind == "string":
            value = client.get(key)
        elif kind == "list":
            value = client.lrange(key, 0, -1)
        elif kind == "hash":
            value = client.hgetall(key)
        elif kind == "set":
            value = client.smembers(key)
        elif kind == "zset":
            value = client.zrange(key, 0, -1)
        else:
            value = kind
        parts.append(f"{key!r} {value!r}")
    return "\n".join(parts)


def test_the_echoed_keys_appear_nowhere(service: Service, start_worker, llm_server: ScriptedLLM) -> None:
    secrets = _secrets()
    echo = f"Incorrect API key provided: {secrets['llm_key']}"
    # the premise: the pattern redaction alone lets this wording through (no name=value, no Bearer)
    assert redact(echo) == echo

    # given every secret setting set, and servers that echo what they were sent
    llm_server.responder = KeyEcho(
        llm_server, status_by_model={"primary": 401, "scripted": 500}, every_form=True
    )
    router = service.tmp / "router.yaml"
    router.write_text(
        "model_list:\n"
        "  - model_name: primary\n"
        "    litellm_params:\n"
        "      model: openai/primary\n"
        f"      api_base: {llm_server.url}\n"
        f"      api_key: {secrets['router_key']}\n"
    )
    database_url = (
        make_url(service.env["FINAGENT_SERVICE_DATABASE_URL"])
        .set(password=secrets["db_password"])
        .render_as_string(hide_password=False)
    )  # trust authentication ignores it; it is configured all the same
    plain = urlsplit(service.env["FINAGENT_SERVICE_BROKER_URL"])
    broker_url = f"redis://default:{secrets['broker_password']}@{plain.netloc}{plain.path}"
    service.env.update(
        FINAGENT_SERVICE_DATABASE_URL=database_url,
        FINAGENT_SERVICE_BROKER_URL=broker_url,
        FINAGENT_LLM_ROUTER_FILE=str(router),
        FINAGENT_LLM_MODEL="primary",
        FINAGENT_LLM_FALLBACKS="openai/scripted",
        FINAGENT_LLM_API_BASE=llm_server.url,
        FINAGENT_LLM_API_KEY=secrets["llm_key"],
        FINAGENT_LLM_NUM_RETRIES="1",
        FINAGENT_LLM_RETRY_BACKOFF="0.1",
        FINAGENT_LLM_TIMEOUT="5",
        FINAGENT_BROKER_ALPACA_API_KEY=secrets["alpaca_id"],
        FINAGENT_BROKER_ALPACA_SECRET_KEY=secrets["alpaca_secret"],
        FINAGENT_API_URL_SIGNING_KEY=secrets["signing_key"],
        FINAGENT_DATA_PROVIDER="tests.support.providers:credential_echo",
        FINAGENT_DATA_TOOL_MAX_RETRIES="1",
        FINAGENT_DURABILITY_TASK_MAX_RETRIES="1",
        FINAGENT_WATCHLISTS_FINALIZE_COUNTDOWN="1",
    )
    flower_port, api_port = free_port(), free_port()
    flower = start_process(
        service, ["flower", "--port", str(flower_port)], "flower.log", FLOWER_UNAUTHENTICATED_API="true"
    )
    api = start_process(service, ["serve", "--host", "127.0.0.1", "--port", str(api_port)], "api.log")
    flower_base, api_base = f"http://127.0.0.1:{flower_port}", f"http://127.0.0.1:{api_port}"
    cli_output: list[str] = []
    try:
        wait_http(flower_base, "/api/workers", flower, lambda: (service.tmp / "flower.log").read_text())
        wait_http(api_base, "/openapi.json", api, lambda: (service.tmp / "api.log").read_text())
        start_worker()

        def key(*args: str) -> str:
            made = service.cli("apikey", "create", *args)
            assert made.returncode == 0, made.stderr
            cli_output.append(made.stderr)
            return made.stdout.strip()

        owner = Http(base=api_base, key=key("owner", "--tenant", "acme"))
        reader = Http(base=api_base, key=key("reader", "--tenant", "acme", "--scopes", "read"))
        outsider = Http(base=api_base, key=key("outsider", "--tenant", "globex", "--scopes", "read"))

        # when the owner starts an LLM analysis, one whose data source fails, and a watchlist run
        # of both symbols
        ids = []
        for symbol in ("AAPL", "IBM"):
            status, body = owner.post("/analyze", {"symbol": symbol, "as_of": RUN_DATE})
            assert status == 202, body
            ids.append(body["analysis_id"])
        assert owner.post("/watchlists", {"name": "nightly", "tickers": ["AAPL", "IBM"]})[0] == 201
        status, body = owner.post("/watchlists/nightly/runs", {"run_date": RUN_DATE})
        assert status == 202, body

        def finished(analysis_id: str) -> dict[str, Any] | None:
            status, body = owner.get(f"/analyses/{analysis_id}")
            assert status == 200, body
            return body if body["status"] in ("done", "failed") else None

        llm_analysis, failing = [
            poll(lambda i=i: finished(i), timeout=240, what=f"{i} finished") for i in ids
        ]

        def digest_ready() -> dict[str, Any] | None:
            status, body = owner.get(f"/watchlists/nightly/runs/{RUN_DATE}/digest?format=json")
            return body if status == 200 else None

        digest = poll(digest_ready, timeout=240, what="the run's digest")

        # then: every place a text can go
        places: dict[str, str] = {}
        for analysis_id in ids + [t["analysis_id"] for t in digest["tickers"]]:
            for who, client in (("owner", owner), ("reader", reader), ("outsider", outsider)):
                status, body = client.get(f"/analyses/{analysis_id}")
                assert status == (404 if who == "outsider" else 200), (who, body)
                places[f"GET /analyses/{analysis_id} as {who}"] = json.dumps(body)
        places["GET /analyses"] = json.dumps(owner.get("/analyses?limit=50")[1])
        for fmt in ("json", "markdown", "html"):
            path = f"/watchlists/nightly/runs/{RUN_DATE}/digest?format={fmt}"
            places[f"digest {fmt}"] = json.dumps(owner.get(path)[1])
        places["GET run"] = json.dumps(owner.get(f"/watchlists/nightly/runs/{RUN_DATE}")[1])

        def failure_shown() -> list[dict[str, Any]] | None:
            tasks = _flower_tasks(flower_base).values()
            failed = [
                t for t in tasks if t.get("name") == "finagent.research" and t.get("state") == "FAILURE"
            ]
            return failed or None

        # Flower shows the failed research tasks (their exception and traceback quote the source)
        failed_research = poll(failure_shown, timeout=60, what="failed research tasks in Flower")
        places["Flower /api/tasks"] = json.dumps(_flower_tasks(flower_base))
        places.update(_console_pages(api_base, owner.key, ids))
        for analysis_id in ids:
            shown = service.cli("show", analysis_id)
            places[f"finagent show {analysis_id}"] = shown.stdout + shown.stderr
        places["CLI apikey output"] = "\n".join(cli_output)
    finally:
        stop_process(api)
        stop_process(flower)
    for log in service.logs:
        places[f"log {log.name}"] = log.read_text(errors="replace")
    places["database"] = _database_dump(service.env["FINAGENT_SERVICE_DATABASE_URL"])
    places["redis"] = _redis_dump(broker_url)

    # the echoes happened: each key went out and came back in the server's error text
    assert {secrets["router_key"], secrets["llm_key"]} <= set(llm_server.responder.keys)
    # no place holds any secret in any form (the LLM keys were echoed in every form)
    leaks = [
        f"{name} ({form}) in {place}"
        for place, text in places.items()
        for name, value in secrets.items()
        for form in leaked_forms(value, text)
    ]
    assert leaks == [], f"{len(leaks)} leaks:\n" + "\n".join(leaks)
    # and what the servers said is kept, masked: the LLM errors (the fallback's retries spent),
    # the failed analysis, its digest line, its Celery failure in Flower
    assert llm_analysis["status"] == "done" and failing["status"] == "failed"
    llm_errors = json.dumps(llm_analysis["report_json"]["errors"])
    assert "every model failed" in llm_errors and MASKED_ECHO in llm_errors, llm_errors
    assert "it was sent key id *** and secret ***" in failing["error"], failing["error"]
    ibm = next(t for t in digest["tickers"] if t["symbol"] == "IBM")
    assert ibm["outcome"] == "failed" and "key id *** and secret ***" in ibm["error"], ibm
    assert MASKED_ECHO in places["database"] and MASKED_ECHO in places["log worker-0.log"]
    assert all("secret ***" in str(t.get("exception")) for t in failed_research), failed_research


def _console_pages(base: str, key: str, analysis_ids: list[str]) -> dict[str, str]:
    """Each analysis's console page (and the list), read in a session signed in with ``key``."""
    import httpx

    pages: dict[str, str] = {}
    with httpx.Client(base_url=base, timeout=30, headers={"Origin": base}) as client:
        login = client.get("/console/login")
        found = re.search(r'name="csrf" value="([^"]+)"', login.text)
        assert found, login.text[:2000]
        signed = client.post("/console/login", data={"api_key": key, "csrf": found.group(1), "next": ""})
        assert signed.status_code == 303, signed.text[:2000]
        pages["console /analyses"] = client.get("/console/analyses").text
        for analysis_id in analysis_ids:
            page = client.get(f"/console/analyses/{analysis_id}")
            assert page.status_code == 200, page.text[:2000]
            pages[f"console /analyses/{analysis_id}"] = page.text
    return pages


def _flower_tasks(base: str) -> dict[str, Any]:
    """Flower's ``/api/tasks``: task id → fields (name, state, args, result, exception, ...)."""
    with urllib.request.urlopen(base + "/api/tasks", timeout=10) as resp:
        tasks: dict[str, Any] = json.loads(resp.read())
    return tasks
