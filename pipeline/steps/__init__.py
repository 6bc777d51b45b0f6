"""The step protocol: how one message of an analysis becomes one durable step (no Celery here).

claim (``claim``) → context (``context``) → stage function (``pipeline/stages``) → checkpoint
(``checkpoint``) → end of the pass or hand-off (``close``); retries (``backoff``), what a
delivery is (``delivery``), the recovery sweep (``recovery``, with ``inventory``: what the broker
holds). ``run.run_step`` is the one function that takes a message through it; the Celery
adapter is ``tasks.base.StageTask``. docs/architecture.md, "The step protocol".
"""
