"""Re-apply the reference clean-up of comments, docstrings and help texts to a tree whose code
moved (another branch): every ``old → new`` block of ``scripts/deseed_pairs.json`` is replaced
wherever the old block occurs once in a ``.py`` file, whichever file holds it now.

Usage: ``uv run python scripts/deseed_apply.py [ROOT]`` (default: the current directory).
Prints the blocks it applied, those already applied, and those it could not find (check those by
hand with the grep of the report). Idempotent: a second run applies nothing. Delete this script
and its JSON once every branch is merged.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(root: Path) -> int:
    """Apply the blocks under ``root``; returns 0 (a missing block is reported, not an error)."""
    pairs = json.loads((Path(__file__).with_name("deseed_pairs.json")).read_text())
    skip = {".venv", ".git", "node_modules", "__pycache__"}
    files = [p for p in sorted(root.rglob("*.py")) if not skip & set(p.relative_to(root).parts)]
    texts = {str(p.relative_to(root)): p.read_text() for p in files}
    applied = done = missing = 0
    for old, new in pairs:
        hits = [f for f, t in texts.items() if t.count(old) == 1]
        if hits:
            for f in hits:
                texts[f] = texts[f].replace(old, new)
                (root / f).write_text(texts[f])
                sys.stdout.write(f"applied  {f}: {old.strip()[:70]!r}\n")
            applied += 1
        elif any(new in t for t in texts.values()):
            done += 1
        else:
            missing += 1
            sys.stdout.write(f"MISSING  {old.strip()[:90]!r}\n")
    sys.stdout.write(f"{applied} applied, {done} already applied, {missing} not found\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()))
