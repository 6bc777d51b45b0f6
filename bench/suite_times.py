"""Per-directory time of a pytest run, from its JUnit XML (docs/testing.md, "Timings").

    uv run --group dev pytest --junitxml=/tmp/suite.xml
    uv run python bench/suite_times.py /tmp/suite.xml [--depth 2]

Prints, per test directory (the first ``--depth`` parts of the test file's path), the number of
tests and the summed time of their setup, call and teardown (pytest's ``junit_duration_report``
default, "total"), largest first. With pytest-xdist the sums are worker-seconds: two workers
running side by side finish in about half of their total.
"""

from __future__ import annotations

import argparse
import xml.etree.ElementTree as ET
from collections import defaultdict


def directory_times(path: str, depth: int) -> dict[str, tuple[int, float]]:
    """``{directory: (tests, seconds)}`` over every ``testcase`` of the JUnit XML at ``path``;
    the directory is taken from the dotted ``classname`` (``tests.db.test_repo`` → ``tests/db``)."""
    totals: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    for case in ET.parse(path).getroot().iter("testcase"):  # a file pytest itself wrote
        parts = case.get("classname", "").split(".")
        module_at = next((i for i, p in enumerate(parts) if p.startswith("test_")), len(parts))
        key = "/".join(parts[: min(depth, module_at)]) or "(root)"
        totals[key][0] += 1
        totals[key][1] += float(case.get("time", "0") or 0)
    return {k: (int(n), s) for k, (n, s) in totals.items()}


def main() -> None:
    """Parse the arguments and print the table (Markdown)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("junit_xml")
    parser.add_argument("--depth", type=int, default=2)
    args = parser.parse_args()
    rows = sorted(directory_times(args.junit_xml, args.depth).items(), key=lambda kv: -kv[1][1])
    print("| directory | tests | seconds (setup+call+teardown) |")
    print("|---|---:|---:|")
    for name, (count, seconds) in rows:
        print(f"| {name} | {count} | {seconds:.0f} |")
    count_all = sum(count for _, (count, _) in rows)
    seconds_all = sum(seconds for _, (_, seconds) in rows)
    print(f"| all | {count_all} | {seconds_all:.0f} |")


if __name__ == "__main__":
    main()
