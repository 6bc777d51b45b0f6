"""Router cooldowns kept in Redis are shared by worker processes: a deployment one process saw
failing gets no request from another (two Routers stand for two prefork children)."""

from __future__ import annotations

from agents.llm import router as router_module
from agents.llm.config import Deployment, LLMConfig, Role
from agents.llm.runner import run_sync
from agents.llm.session import LLMSession
from tests.llm.server import ScriptedLLM, chat, error


def test_a_cooldown_in_redis_is_seen_by_another_process(redis_url: str) -> None:
    primary, backup = ScriptedLLM().start(), ScriptedLLM().start()
    try:
        primary.responder = lambda body: error(503)
        backup.responder = lambda body: chat("from backup")
        config = LLMConfig(
            models={Role.TECHNICAL: "primary"},
            fallbacks=("backup",),
            deployments=(
                Deployment(name="primary", model="openai/p", api_base=primary.url, api_key="k1"),
                Deployment(name="backup", model="openai/b", api_base=backup.url, api_key="k2"),
            ),
            num_retries=0,
            allowed_fails=0,
            cooldown_time=30,
            cooldown_redis_url=redis_url,
        )
        messages = [{"role": "user", "content": "hi"}]
        first = LLMSession(config=config, analysis_id="a1")
        run_sync(first.complete(agent="technical", role=Role.TECHNICAL, messages=messages))
        router_module._ROUTERS.clear()  # "another process": a new Router, nothing in memory
        second = LLMSession(config=config, analysis_id="a2")
        run_sync(second.complete(agent="technical", role=Role.TECHNICAL, messages=messages))

        assert primary.models_called() == ["p"]  # only the first process tried it
        assert [r["model"] for r in second.rows] == ["backup"] and second.skipped
    finally:
        primary.stop()
        backup.stop()
        router_module._ROUTERS.clear()
