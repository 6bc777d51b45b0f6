"""Packaging: no installed dependency ships a top-level module named like one of ours."""

from __future__ import annotations

import importlib.metadata

OUR_PACKAGES = {"apps", "pipeline", "tasks", "agents", "db", "core"}


def _top_level_names(dist: importlib.metadata.Distribution) -> set[str]:
    names = set((dist.read_text("top_level.txt") or "").split())
    for file in dist.files or ():
        parts = file.parts
        if parts and not parts[0].endswith((".dist-info", ".data")) and parts[0] != "..":
            names.add(parts[0].removesuffix(".py"))
    return names


def test_no_dependency_installs_our_package_names() -> None:
    clashes = {}
    for dist in importlib.metadata.distributions():
        if dist.metadata["Name"] == "finagent":
            continue
        hit = _top_level_names(dist) & OUR_PACKAGES
        if hit:
            clashes[dist.metadata["Name"]] = sorted(hit)
    assert clashes == {}


def test_our_packages_import_from_this_repository() -> None:
    from pathlib import Path

    import agents
    import apps
    import core
    import db
    import pipeline
    import tasks

    root = Path(__file__).resolve().parents[1]
    for module in (agents, apps, core, db, pipeline, tasks):
        assert Path(module.__file__ or "").resolve().parent.parent == root
