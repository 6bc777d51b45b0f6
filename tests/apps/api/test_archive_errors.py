"""An archived analysis whose compression dictionary is damaged: ``finagent show`` exits 3
naming the dictionary (1 would say the analysis failed), ``GET /analyses/{id}`` answers 503
with the cause (not 500), and ``finagent archive --verify`` names every unreadable frame. A real
SQLite file, the CLI as a subprocess, the gateway over HTTP."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import httpx

from apps.api.auth import create_key
from core.settings import Settings
from db import archive
from db.engine import dispose_engines, get_engine
from db.migrate import upgrade
from tests.apps.api.conftest import serve_app
from tests.conftest import REPO_ROOT
from tests.db.test_archive import _finished, _soon

FINAGENT = str(Path(sys.executable).with_name("finagent"))


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [FINAGENT, *args], env=env, capture_output=True, text=True, timeout=120, check=False, cwd=REPO_ROOT
    )


def test_a_damaged_dictionary_is_named_with_exit_3_and_503(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'a.sqlite3'}"
    upgrade(url=url)
    engine = get_engine(url)
    ids = [_finished(engine, pad=f"{i:02d}") for i in range(archive.MIN_TRAIN_SAMPLES)]
    dictionary = archive.archive(engine=engine, before=_soon()).dictionary
    assert dictionary is not None
    env = {k: v for k, v in os.environ.items() if not k.startswith("FINAGENT_")}
    env |= {"FINAGENT_SERVICE_DATABASE_URL": url, "FINAGENT_SERVICE_STATE_DIR": str(tmp_path / "state")}
    assert _cli(env, "show", ids[0]).returncode == 0  # readable before
    verified = _cli(env, "archive", "--verify")
    assert verified.returncode == 0 and f"{len(ids)} archives" in verified.stdout, verified.stderr

    # when the dictionary's bytes are damaged
    with sqlite3.connect(tmp_path / "a.sqlite3") as raw:
        raw.execute("UPDATE compression_dictionaries SET body = zeroblob(300) WHERE id = ?", (dictionary,))
    dispose_engines(close=True)
    archive._DICTIONARIES.clear()
    archive._CODECS.__dict__.clear()

    shown = _cli(env, "show", ids[0])
    assert shown.returncode == 3, shown.stderr
    assert f"compression dictionary {dictionary}" in shown.stderr and "Traceback" not in shown.stderr
    verified = _cli(env, "archive", "--verify")
    assert verified.returncode == 3
    assert verified.stderr.count("UNREADABLE analysis") == len(ids) and dictionary in verified.stderr

    settings = Settings(service_database_url=url, service_state_dir=tmp_path / "state")
    key = create_key(name="reader", settings=settings)
    with serve_app(settings) as base:
        answer = httpx.get(f"{base}/analyses/{ids[0]}", headers={"X-API-Key": key}, timeout=30)
    assert answer.status_code == 503, answer.text
    assert f"compression dictionary {dictionary}" in answer.json()["detail"]
