"""The Docker image and the compose services run finagent as an unprivileged user.

Not exercised with a Docker engine here (none on this machine): this reads the files as Docker
would. Celery warns against a root worker (``celery.platforms.check_privileges``), and a root
process in a container is root on the host's kernel.
"""

from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def _instructions(dockerfile: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of a Dockerfile, with ``\\`` continuations joined."""
    joined = dockerfile.replace("\\\n", " ")
    out = []
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def test_image_runs_as_a_non_root_user() -> None:
    steps = _instructions((ROOT / "Dockerfile").read_text())
    users = [args for word, args in steps if word == "USER"]
    assert users, "no USER instruction: the image runs as root"
    assert users[-1].split(":")[0] not in {"root", "0"}
    # the user is created before it is used
    assert any(word == "RUN" and "useradd" in args and users[-1] in args for word, args in steps)


def test_image_does_not_set_uv_compile_bytecode_for_runtime() -> None:
    # UV_COMPILE_BYTECODE in ENV makes every `uv run` in the container recompile site-packages
    envs = " ".join(args for word, args in _instructions((ROOT / "Dockerfile").read_text()) if word == "ENV")
    assert "UV_COMPILE_BYTECODE" not in envs


def test_compose_finagent_services_run_as_non_root() -> None:
    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    ours = {name: svc for name, svc in services.items() if "build" in svc}
    assert set(ours) == {"migrate", "worker", "beat", "sweeper", "flower", "api"}
    for name, svc in ours.items():
        user = str(svc.get("user", ""))
        assert user and user.split(":")[0] not in {"root", "0"}, name
