# The finagent image: the worker, the migrations and the CLI share it. Everything runs as the
# unprivileged user `finagent` (uid 10001): Celery warns against running a worker as root
# (celery.platforms.check_privileges), and nothing here needs root after the build.
FROM python:3.12-slim
ENV PYTHONUNBUFFERED=1 UV_LINK_MODE=copy
RUN pip install --no-cache-dir "uv>=0.5,<1" \
    && useradd --create-home --uid 10001 --user-group finagent \
    && install -d -o finagent -g finagent /app
WORKDIR /app
USER finagent
COPY --chown=finagent:finagent pyproject.toml uv.lock README.md ./
# --compile-bytecode at build time only (not UV_COMPILE_BYTECODE in the image's ENV: with it,
# every later `uv run` recompiles all of site-packages, astral-sh/uv#12202).
RUN uv sync --locked --no-dev --no-install-project --compile-bytecode
COPY --chown=finagent:finagent apps apps
COPY --chown=finagent:finagent pipeline pipeline
COPY --chown=finagent:finagent tasks tasks
COPY --chown=finagent:finagent agents agents
COPY --chown=finagent:finagent db db
COPY --chown=finagent:finagent core core
COPY --chown=finagent:finagent alembic.ini ./
RUN uv sync --locked --no-dev --compile-bytecode
ENV PATH="/app/.venv/bin:$PATH" \
    FINAGENT_SERVICE_STATE_DIR=/home/finagent/.local/state/finagent
# Compile pandas-ta's numba kernels into the image (numba's cache sits next to pandas-ta in
# .venv, owned by finagent) so workers start warm.
RUN python -c "from agents.technical import warm_up; warm_up()"
CMD ["finagent", "--help"]
