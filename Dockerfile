# kernelsmith's GitHub App service: `kernelsmith serve` (docs/deploy.md).
#
#   docker build -t kernelsmith .                                   # CPU: jobs run on Triton's interpreter
#   docker build -t kernelsmith --build-arg TORCH_INDEX=https://download.pytorch.org/whl/cu128 \
#                --build-arg BASE=nvidia/cuda:12.8.1-runtime-ubuntu24.04 .   # NVIDIA GPUs (run with --gpus all)
#
# Configuration is by environment only; three variables are required (KS_WEBHOOK_SECRET, KS_APP_ID and
# KS_PRIVATE_KEY or KS_PRIVATE_KEY_PATH). The job store (SQLite), clones and run folders live in /data.
ARG BASE=python:3.11-slim
FROM ${BASE}

ARG TORCH_INDEX=https://download.pytorch.org/whl/cpu
ARG TORCH_VERSION=2.13.0
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1

# git for clones and pushes; a C compiler for Triton's launcher; python3 where the base image is not python:*
RUN apt-get update \
 && apt-get install -y --no-install-recommends git ca-certificates gcc libc6-dev \
 && if ! command -v python3 >/dev/null; then apt-get install -y --no-install-recommends python3 python3-venv; fi \
 && rm -rf /var/lib/apt/lists/*

RUN python3 -m venv /opt/kernelsmith
ENV PATH=/opt/kernelsmith/bin:$PATH
RUN pip install "torch==${TORCH_VERSION}" --index-url "${TORCH_INDEX}"

WORKDIR /src
COPY pyproject.toml README.md ./
COPY bot ./bot
COPY evolver ./evolver
COPY runners ./runners
COPY templates ./templates
RUN pip install .

RUN useradd --create-home --uid 10001 kernelsmith && mkdir /data && chown kernelsmith /data
USER kernelsmith
WORKDIR /data
ENV KS_DATA_DIR=/data KS_GPUS=auto
VOLUME ["/data"]
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s \
  CMD python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4)"
CMD ["kernelsmith", "serve", "--host", "0.0.0.0", "--port", "8000"]
