"""The recipes of docs/architecture.md, followed on a copy of the source tree: each adds a toy
one (an analysis type, a data source, a stage, an analyst) by editing and adding exactly the files its recipe
names, proves it works as the recipe says, and counts the files it needed against the count the
recipe states. The copy (``agents``, ``apps``, ``core``, ``db``, ``pipeline``, ``tasks`` under ``tmp_path``)
comes first on ``PYTHONPATH`` of a subprocess, so the repository is never touched."""

from __future__ import annotations

import filecmp
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO_ROOT

PACKAGES = ("agents", "apps", "core", "db", "pipeline", "tasks")
DOC = REPO_ROOT / "docs" / "architecture.md"


def _copy(tmp: Path) -> Path:
    root = tmp / "src"
    for package in PACKAGES:
        shutil.copytree(REPO_ROOT / package, root / package, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, f"{old!r} is not once in {path}"
    path.write_text(text.replace(old, new), encoding="utf-8")


def _touched(root: Path) -> list[str]:
    """The files of the copy that differ from the repository's or are new (paths from the root)."""
    out: list[str] = []

    def walk(cmp: filecmp.dircmp[str], rel: str) -> None:
        out.extend(f"{rel}{name}" for name in cmp.diff_files)
        for name in cmp.left_only:
            path = Path(cmp.left) / name
            if path.is_dir():
                out.extend(f"{rel}{name}/{p.relative_to(path).as_posix()}" for p in path.rglob("*.py"))
            else:
                out.append(f"{rel}{name}")
        for name, sub in cmp.subdirs.items():
            if name != "__pycache__":
                walk(sub, f"{rel}{name}/")

    for package in PACKAGES:
        walk(filecmp.dircmp(root / package, REPO_ROOT / package, ignore=["__pycache__"]), f"{package}/")
    return sorted(out)


def _stated_count(heading: str) -> int:
    """The file count a recipe's heading (or its paragraph's bold line) states: "(3 files"."""
    text = DOC.read_text(encoding="utf-8")
    match = re.search(re.escape(heading) + r"[^\n]*\((\d+) files?", text)
    assert match, f"docs/architecture.md states no file count for {heading!r}"
    return int(match.group(1))


def _run(root: Path, tmp: Path, code: str, **env: str) -> str:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("FINAGENT_")}
    environ.update(PYTHONPATH=str(root), FINAGENT_STATE_DIR=str(tmp / "state"), **env)
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp, env=environ, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


TOY_PLAN = '''"""A toy analysis type: it answers with the close it was shown."""

from __future__ import annotations

from typing import Any

from core.plans import plan_spec
from core.state import FinancialAgentState
from pipeline.plans.base import Plan


def run(state: FinancialAgentState, ctx: Any, llm: Any) -> None:
    state.plan_result = {"symbol": state.stock_symbol, "as_of": str(state.as_of), "answer": "toy"}


def result_json(state: FinancialAgentState) -> Any:
    return state.plan_result if state.analysis_type == "toy" else None


def report_markdown(state: FinancialAgentState) -> list[str]:
    return ["## Toy", "", f"The toy plan answered for {state.stock_symbol}."] if state.plan_result else []


PLANS = (Plan(spec=plan_spec("toy"), run=run, result_json=result_json, report_markdown=report_markdown),)
'''


def test_an_analysis_type_is_one_row_and_its_package(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    plans = root / "core" / "plans.py"
    _edit(plans, '"covered_call", "put_spread"\n', '"covered_call", "put_spread", "toy"\n')
    _edit(
        plans,
        "\n)\n\n#: The type of a request that states none.",
        '\n    PlanSpec(name="toy", help="a toy plan", steps=("toy",), result_field="toy",'
        ' report_section="Toy", backtest=False, null_in_json=False),\n)\n\n'
        "#: The type of a request that states none.",
    )
    (root / "pipeline" / "plans" / "toy").mkdir()
    (root / "pipeline" / "plans" / "toy" / "__init__.py").write_text(TOY_PLAN, encoding="utf-8")
    table = root / "pipeline" / "plans" / "table.py"
    _edit(table, "import composite, option, put_spread\n", "import composite, option, put_spread, toy\n")
    _edit(table, "    *put_spread.PLANS,\n", "    *put_spread.PLANS,\n    *toy.PLANS,\n")

    touched = _touched(root)
    assert touched == ["core/plans.py", "pipeline/plans/table.py", "pipeline/plans/toy/__init__.py"]
    # the recipe: "2 files + its package": the row, the plan table's entry, and the package's files
    package = [path for path in touched if path.startswith("pipeline/plans/toy/")]
    assert len(touched) - len(package) == _stated_count("### Add an analysis type")

    out = _run(
        root,
        tmp_path,
        "import json, sys\n"
        "from tasks.main import main\n"
        "sys.argv = ['finagent', 'analyze', 'AAPL', '--as-of', '2012-06-29', '--type', 'toy', '--json']\n"
        "main()\n",
    )
    report = json.loads(out[out.index("{") :])
    assert report["analysis_type"] == "toy"
    assert report["toy"] == {"symbol": "AAPL", "as_of": "2012-06-29", "answer": "toy"}
    shown = _run(
        root,
        tmp_path,
        "import sys\nfrom tasks.main import main\n"
        f"sys.argv = ['finagent', 'show', {report['analysis_id']!r}]\nmain()\n",
    )
    assert "## Toy" in shown and "The toy plan answered for AAPL." in shown


TOY_SOURCE = '''"""A toy bars source: the embedded bars, under another name."""

from __future__ import annotations

from agents.data.market.embedded import EmbeddedProvider


class ToyProvider(EmbeddedProvider):
    """The embedded provider under the name ``toy``."""
'''


def test_a_data_source_is_the_files_its_recipe_names(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    (root / "agents" / "data" / "market" / "toy.py").write_text(TOY_SOURCE, encoding="utf-8")
    routing = root / "agents" / "data" / "routing.py"
    _edit(
        routing,
        "ROUTES: Mapping[str, Route] = MappingProxyType(\n",
        "def _toy_bars(settings: Settings) -> MarketDataProvider:\n"
        "    from agents.data.market.toy import ToyProvider\n\n"
        "    return ToyProvider()\n\n\n"
        "ROUTES: Mapping[str, Route] = MappingProxyType(\n",
    )
    _edit(
        routing,
        '"embedded": Route(bars=_embedded_bars),\n',
        '"embedded": Route(bars=_embedded_bars),\n"toy": Route(bars=_toy_bars),\n',
    )
    data = root / "core" / "settings" / "data.py"
    names = re.search(r"DATA_PROVIDER_NAMES[^=]*= \(([^)]*)\)", data.read_text(encoding="utf-8"))
    assert names, "core/settings/data.py has no DATA_PROVIDER_NAMES tuple"
    _edit(data, names.group(1), names.group(1).rstrip().rstrip(",") + ', "toy"')

    touched = _touched(root)
    assert touched == ["agents/data/market/toy.py", "agents/data/routing.py", "core/settings/data.py"]
    assert len(touched) == _stated_count("**Add a source")

    out = _run(
        root,
        tmp_path,
        "from agents.data.routing import get_provider\n"
        "from core.settings import get_settings\n"
        "print(type(get_provider(settings=get_settings())).__name__)\n",
        FINAGENT_DATA_PROVIDER="toy",
    )
    assert out.strip() == "ToyProvider"


TOY_STAGE = '''"""A toy stage: it leaves a mark that it ran, and the state as it was."""

from __future__ import annotations

import os
from pathlib import Path

from core.state import FinancialAgentState
from pipeline.steps.context import StepContext


def toy(*, state: FinancialAgentState, ctx: StepContext) -> FinancialAgentState:
    """Mark that the toy stage ran; the state as it was."""
    Path(os.environ["FINAGENT_STATE_DIR"], "toy-stage-ran").write_text(state.stock_symbol, encoding="utf-8")
    return state
'''


def test_a_stage_is_the_files_its_recipe_names(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    stages = root / "core" / "stages.py"
    _edit(stages, '    ANALYZING = "analyzing"\n', '    ANALYZING = "analyzing"\n    TOYING = "toying"\n')
    _edit(
        stages,
        '    StageSpec(name="analysis", status=Status.ANALYZING, queue="analysis"),\n',
        '    StageSpec(name="analysis", status=Status.ANALYZING, queue="analysis"),\n'
        '    StageSpec(name="toy", status=Status.TOYING, queue="toy"),\n',
    )
    (root / "pipeline" / "stages" / "toy.py").write_text(TOY_STAGE, encoding="utf-8")
    table = root / "pipeline" / "stages" / "table.py"
    _edit(
        table,
        "from pipeline.stages.review import review\n",
        "from pipeline.stages.review import review\nfrom pipeline.stages.toy import toy\n",
    )
    _edit(table, '    "review": review,\n', '    "review": review,\n    "toy": toy,\n')

    touched = _touched(root)
    assert touched == ["core/stages.py", "pipeline/stages/table.py", "pipeline/stages/toy.py"]
    assert len(touched) == _stated_count("### Add a stage")

    out = _run(
        root,
        tmp_path,
        "import sys\n"
        "from tasks.main import main\n"
        "sys.argv = ['finagent', 'analyze', 'AAPL', '--as-of', '2012-06-29', '--json']\n"
        "main()\n",
    )
    report = json.loads(out[out.index("{") :])
    assert report["status"] == "done"
    assert (tmp_path / "state" / "toy-stage-ran").read_text(encoding="utf-8") == "AAPL"


TOY_ANALYST = '''"""A toy analyst: it reads the quote and says how far the close is from the 52-week high."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def toy_view(inputs: Mapping[str, Any]) -> dict[str, Any] | None:
    """The close and its distance below the 52-week high (a fraction), from ``get_stock_data``."""
    quote = inputs["get_stock_data"]
    close, high = quote["current_price"], quote["52w_high"]
    return {"close": close, "below_high": round(1 - close / high, 4)}


def toy_markdown(view: Mapping[str, Any]) -> list[str]:
    """One sentence about the view."""
    return [f"The toy analyst read a close of {view['close']}."]
'''


def test_an_analyst_is_its_module_and_one_row(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    (root / "agents" / "analysts" / "toy.py").write_text(TOY_ANALYST, encoding="utf-8")
    table = root / "agents" / "analysts" / "table.py"
    _edit(
        table,
        "from typing import Any, Final, Literal\n",
        "from typing import Any, Final, Literal\n\nfrom agents.analysts.toy import toy_markdown, toy_view\n",
    )
    _edit(
        table,
        '        scorecard="llm synthesis",\n    ),\n)\n',
        '        scorecard="llm synthesis",\n    ),\n'
        '    AnalystRow(name="toy", stage="analysis", inputs=("get_stock_data",), view="analysis.views.toy",'
        ' fallback="no toy view", llm=None, section="Toy analyst", weight="0", scorecard="toy",'
        " analyze=toy_view, markdown=toy_markdown),\n)\n",
    )

    touched = _touched(root)
    assert touched == ["agents/analysts/table.py", "agents/analysts/toy.py"]
    assert len(touched) == _stated_count("### Add an analyst")

    out = _run(
        root,
        tmp_path,
        "import sys\nfrom tasks.main import main\n"
        "sys.argv = ['finagent', 'analyze', 'AAPL', '--as-of', '2012-06-29', '--json']\nmain()\n",
    )
    report = json.loads(out[out.index("{") :])
    assert report["status"] == "done"
    toy = report["analyst_views"]["toy"]
    # the toy's view is the quote the report shows, read through its own cited tool call
    assert toy["view"]["close"] == report["quote"]["current_price"]
    assert 0 <= toy["view"]["below_high"] < 1
    assert len(toy["source_refs"]) == 1 and toy["source_refs"][0] in report["source_refs"]
    shown = _run(
        root,
        tmp_path,
        "import sys\nfrom tasks.main import main\n"
        f"sys.argv = ['finagent', 'show', {report['analysis_id']!r}]\nmain()\n",
    )
    assert f"## Toy analyst `[{toy['source_refs'][0]}]`" in shown
    assert f"The toy analyst read a close of {report['quote']['current_price']}." in shown
