"""agents.analysts.versions: the rule-set label follows the scorer's code, not its prose."""

from __future__ import annotations

import inspect

from agents.analysts.versions import RULE_SET_LABELS, rules_fingerprint, rules_version
from agents.quant import calibration, scorer


def _source() -> str:
    return inspect.getsource(scorer)


def test_the_shipped_rule_set_keeps_the_label_its_reports_carry() -> None:
    # the regression snapshots (tests/regression/snapshots/*.json) were written with this label
    assert rules_version() == "rules-4dd7af96cf"
    assert RULE_SET_LABELS[rules_fingerprint(_source())] == "rules-4dd7af96cf"
    # the rule set before the trend rules voted once keeps the label of the reports it wrote
    assert "rules-3677c5fe86" in RULE_SET_LABELS.values()


def test_the_shipped_calibration_covers_the_shipped_rule_set() -> None:
    # a scorer change without a rebuilt artifact would make every deterministic signal abstain
    assert rules_version() in calibration.load().labels()


def test_docstrings_comments_and_imports_do_not_change_the_fingerprint() -> None:
    source = _source()
    edited = source.replace('"""A deterministic, documented', '"""Reworded: a deterministic, documented', 1)
    edited = edited.replace(
        "from __future__ import annotations", "from __future__ import annotations\nimport os  # moved", 1
    )
    edited += "\n# a trailing comment\n"
    assert edited != source
    assert rules_fingerprint(edited) == rules_fingerprint(source)


def test_the_split_of_the_llm_agents_keeps_the_prompt_version_its_reports_carry() -> None:
    # the messages were byte-identical before and after the LLM agents' module became a package
    # of stages; the reports (and the calibration rows keyed by them) keep this label
    from agents.analysts.versions import PROMPT_LABELS, prompt_version

    assert PROMPT_LABELS["0cff37f3c9"] == "prompts-ed60c40ee4"
    # since then the readings print numbers as the report's tables ("SMA 483.20", not
    # "483.1986"): the analysts are shown other text, so that is a new prompt version
    assert prompt_version() != "prompts-ed60c40ee4"
    assert prompt_version().startswith("prompts-")


def test_a_changed_threshold_is_a_new_rule_set() -> None:
    source = _source()
    assert "0.25" in source
    changed = source.replace("0.25", "0.3")
    assert rules_fingerprint(changed) != rules_fingerprint(source)
    assert rules_fingerprint(changed) not in RULE_SET_LABELS


def _shows_one_line(context: str) -> str:
    return context + "\nReadings: none"


def test_the_code_that_builds_the_messages_is_part_of_the_prompt_version(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A change in what an analyst is shown (the code of ``run_analysts``, the digests, the
    synthesis context) changes the prompt version as a changed instruction does; the version
    is a pure function of that code (two calls agree)."""
    from agents.analysts import llm_agents, prompts, versions
    from agents.analysts.llm_agents import context

    shipped = versions.context_code()
    assert llm_agents.run_analysts in shipped and prompts.fundamentals_digest in shipped
    assert context.analyst_context in shipped and llm_agents.synthesis_context in shipped
    modules = {getattr(inspect.getmodule(fn), "__name__", "") for fn in shipped}
    assert all(m == prompts.__name__ or m.startswith(f"{llm_agents.__name__}.") for m in modules)
    fresh = versions.prompt_version.__wrapped__  # uncached (the version is cached per process)
    base = fresh()
    assert fresh() == base == versions.prompt_version()
    monkeypatch.setattr(versions, "context_code", lambda: (*shipped[:-1], _shows_one_line))
    assert fresh() != base
