"""Prompt size of each LLM analyst under the local-cpu profile: this checkout against a baseline
checkout (e.g. main), measured in the same run.

    uv run python bench/llm_prompt_size.py [--baseline /work/main] [--symbol S --as-of D] [--show] [--json]

Runs ``finagent analyze AAPL --as-of 2015-06-30`` (or ``--symbol``/``--as-of``; stocknet
prices, fundamentals and Benzinga headlines of ``../shared/data``) with
``FINAGENT_LLM_PROFILE=local-cpu`` against the scripted OpenAI-compatible server of the tests,
answering valid JSON whose notes write back the prompt's description of notes
(``tests.llm.responders.HintEcho``; the size of the first request does not depend on the answer),
once with this checkout's code and once with the baseline's (``PYTHONPATH`` first, same
interpreter and packages). For each agent's first request it counts the tokens of the system
and user messages with LiteLLM's ``token_counter`` (the cl100k encoding: Qwen's tokenizer is not
available offline; counts of other tokenizers differ by some percent, the ratio much less) and
the characters. ``ratio`` = tokens here ÷ tokens in the baseline, per agent.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # first: a dependency may ship a top-level "tests" package

from tests.llm.responders import HintEcho  # noqa: E402 (after the sys.path line above)
from tests.llm.server import ScriptedLLM  # noqa: E402

SHARED = REPO.parent / "shared" / "data"
AGENTS = {
    "technical": "technical (chart) analyst",
    "fundamental": "You are a fundamental analyst",
    "sentiment": "news and sentiment analyst",
    "synthesis": "synthesis step",
}


def measure(
    code: Path, server: ScriptedLLM, *, symbol: str = "AAPL", as_of: str = "2015-06-30", show: bool = False
) -> dict[str, dict[str, int]]:
    """``{agent: {tokens, chars}}`` of the first request of each agent when ``code`` (a
    checkout) runs the analysis against ``server``; ``show``: print each agent's user message
    to stderr. Raises RuntimeError when it fails."""
    import litellm

    copier = HintEcho()
    server.responder = copier
    with tempfile.TemporaryDirectory(prefix="finagent-prompt-size-") as state:
        env = {k: v for k, v in os.environ.items() if not k.startswith("FINAGENT_")}
        env.update(
            PYTHONPATH=str(code),
            LITELLM_LOCAL_MODEL_COST_MAP="True",
            FINAGENT_SERVICE_STATE_DIR=state,
            FINAGENT_LLM_PROFILE="local-cpu",
            FINAGENT_LLM_MODEL="openai/qwen-0.5b",
            FINAGENT_LLM_API_BASE=server.url,
            FINAGENT_LLM_API_KEY="sk-local-bench",
            FINAGENT_DATA_PROVIDER="csv",
            FINAGENT_DATA_DIR=str(SHARED / "ohlcv" / "stocknet"),
            FINAGENT_DATA_FUNDAMENTALS_DIR=str(SHARED / "fundamentals"),
            FINAGENT_DATA_NEWS_DIR=str(SHARED / "news" / "benzinga"),
        )
        # the finagent command of that checkout: ``python -m tasks`` (it installs the task queue),
        # or ``python -m pipeline.cli`` in a checkout from before the command moved to tasks.main
        module = "tasks" if (code / "tasks" / "__main__.py").exists() else "pipeline.cli"
        command = [sys.executable, "-m", module, "analyze", symbol, "--as-of", as_of, "--json"]
        proc = subprocess.run(
            command, env=env, cwd=code, capture_output=True, text=True, timeout=900, check=False
        )
    if proc.returncode != 0:
        raise RuntimeError(f"{code}: exit {proc.returncode}: {proc.stderr.strip()[-500:]}")
    out: dict[str, dict[str, int]] = {}
    for body in copier.bodies:
        messages = body.get("messages") or []
        system = str(messages[0].get("content") or "") if messages else ""
        agent = next((a for a, marker in AGENTS.items() if marker in system), None)
        if agent is None or agent in out:
            continue
        shown = [{"role": m["role"], "content": str(m.get("content") or "")} for m in messages[:2]]
        tokens = litellm.token_counter(model="gpt-3.5-turbo", messages=shown)
        out[agent] = {"tokens": int(tokens), "chars": sum(len(m["content"]) for m in shown)}
        if show and len(shown) > 1:
            print(f"--- {agent} ({code}):\n{shown[1]['content']}", file=sys.stderr)
    return out


def main(argv: list[str] | None = None) -> int:
    """Measure both checkouts and print the table (or ``--json``). Exit 1 without the shared data."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--baseline", type=Path, default=REPO.parent.parent / "main", help="baseline checkout"
    )
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--symbol", default="AAPL", help="stocknet symbol (default AAPL)")
    parser.add_argument("--as-of", default="2015-06-30", help="analysis date (default 2015-06-30)")
    parser.add_argument("--show", action="store_true", help="print each agent's user message (stderr)")
    args = parser.parse_args(argv)
    if not SHARED.is_dir():
        print(f"{SHARED} is absent: the analysis needs its headlines and fundamentals", file=sys.stderr)
        return 1
    server = ScriptedLLM().start()
    try:
        before = measure(
            args.baseline.resolve(), server, symbol=args.symbol, as_of=args.as_of, show=args.show
        )
        after = measure(REPO, server, symbol=args.symbol, as_of=args.as_of, show=args.show)
    finally:
        server.stop()
    rows: list[dict[str, Any]] = []
    for agent in AGENTS:
        b, a = before.get(agent), after.get(agent)
        ratio = round(a["tokens"] / b["tokens"], 2) if a and b else None
        rows.append({"agent": agent, "baseline": b, "this": a, "ratio": ratio})
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"{'agent':<12} {'baseline tok':>12} {'this tok':>9} {'ratio':>6}  chars baseline → this")
    for r in rows:
        b, a = r["baseline"] or {}, r["this"] or {}
        print(
            f"{r['agent']:<12} {b.get('tokens', '-'):>12} {a.get('tokens', '-'):>9} {r['ratio'] or '-':>6}"
            f"  {b.get('chars', '-')} → {a.get('chars', '-')}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
