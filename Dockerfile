# The finagent image: the worker, the migrations and the CLI share it.
FROM python:3.12-slim
ENV PYTHONUNBUFFERED=1 UV_LINK_MODE=copy UV_COMPILE_BYTECODE=1
RUN pip install --no-cache-dir "uv>=0.5,<1"
WORKDIR /app
COPY pyproject.toml uv.lock README.md ./
RUN uv sync --locked --no-dev --no-install-project
COPY pipeline pipeline
COPY tasks tasks
COPY agents agents
COPY db db
COPY alembic.ini ./
RUN uv sync --locked --no-dev
ENV PATH="/app/.venv/bin:$PATH"
# Compile pandas-ta's numba kernels into the image so workers start warm.
RUN python -c "from agents.technical import warm_up; warm_up()"
CMD ["finagent", "--help"]
