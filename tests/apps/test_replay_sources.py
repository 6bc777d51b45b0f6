"""``finagent replay`` uses the optional data sources recorded with the analysis, not the
calling shell's settings: an analysis run with a news folder replays identical from a shell
without one (it used to differ: the replayed research skipped the news call the worker made).
Embedded mode, the CLI as subprocesses, a real headline file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO_ROOT

FINAGENT = str(Path(sys.executable).with_name("finagent"))


def _cli(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [FINAGENT, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=300, check=False
    )


def test_a_replay_reads_the_news_the_worker_read_whatever_this_shell_configures(tmp_path: Path) -> None:
    news = tmp_path / "news"
    news.mkdir()
    (news / "headlines.csv").write_text(
        "title,date,stock\n"
        "Apple shares rise on strong iPhone demand,2012-06-28 14:00:00,AAPL\n"
        "Apple faces supplier questions,2012-06-27 10:00:00,AAPL\n",
        encoding="utf-8",
    )
    base = {k: v for k, v in os.environ.items() if not k.startswith("FINAGENT_")}
    base |= {"FINAGENT_SERVICE_STATE_DIR": str(tmp_path / "state"), "PYTHONPATH": str(REPO_ROOT)}
    worker = {**base, "FINAGENT_DATA_NEWS_PROVIDER": "files", "FINAGENT_DATA_NEWS_DIR": str(news)}
    ran = _cli(worker, tmp_path, "analyze", "AAPL", "--as-of", "2012-06-29", "--json")
    assert ran.returncode == 0, ran.stderr[-3000:]
    report = json.loads(ran.stdout)
    assert report["status"] == "done"
    # the worker read the news: a get_news call is cited in the sentiment view
    assert "get_news_" in ran.stdout

    for shell in (base, {**base, "FINAGENT_DATA_NEWS_PROVIDER": "rss"}):  # no news folder, another provider
        replayed = _cli(shell, tmp_path, "replay", report["analysis_id"])
        assert replayed.returncode == 0, replayed.stdout[-3000:] + replayed.stderr[-3000:]
        assert replayed.stdout.startswith("identical sha256="), replayed.stdout[-3000:]
