# syntax=docker/dockerfile:1
# Flux in a container: one image for the server and the worker (docs/deploy.md).
#
#   docker build -t flux-engine:0.1.0 .                          # CPU image (the default target)
#   docker build --target gpu -t flux-engine-gpu:0.1.0 .          # GPU worker variant
#   docker run --rm -p 8000:8000 flux-engine:0.1.0                # a server: CMD below
#   docker run --rm flux-engine:0.1.0 start worker w1 --server-url http://flux:8000
#
# tests/test_deploy.py checks what it can without a Docker daemon: this file's properties
# (non-root USER, HEALTHCHECK, ENTRYPOINT flux), the wheel built from what the build stage
# copies, installed into a fresh venv, and the entrypoint command answering /health.

ARG PYTHON_IMAGE=python:3.11-slim

# --- 1. build: the wheel, from the repository ------------------------------------------
FROM ${PYTHON_IMAGE} AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY flux ./flux
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

# --- 2. runtime: the wheel and its dependencies, nothing else --------------------------
FROM ${PYTHON_IMAGE} AS runtime
# Extras baked in: psycopg for PostgreSQL (a fleet), more with --build-arg EXTRAS=postgres,otel
ARG EXTRAS=postgres
ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    FLUX_HOME=/var/lib/flux \
    FLUX_HOST=0.0.0.0 \
    FLUX_PORT=8000
COPY --from=build /wheels /wheels
RUN pip install "$(ls /wheels/flux_engine-*.whl)[${EXTRAS}]" && rm -rf /wheels
# A numeric, non-root user: Kubernetes' runAsNonRoot can verify it.
RUN groupadd --gid 10001 flux \
 && useradd --uid 10001 --gid 10001 --home-dir /var/lib/flux --create-home --shell /usr/sbin/nologin flux
USER 10001:10001
# The working directory is where executions run and what the probe's disk figures measure.
WORKDIR /var/lib/flux
EXPOSE 8000
# The server's /health (a worker has no port: compose and Kubernetes turn this off for workers).
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/health' % os.environ.get('FLUX_PORT', '8000'), timeout=4)"]
ENTRYPOINT ["flux"]
CMD ["start", "server"]

# --- 3. gpu: the runtime plus what the NVIDIA container toolkit needs ----------------------
# NVML (the GPU probe) comes with the driver, which the toolkit mounts at run time; CUDA
# libraries come with the workflows' own packages (torch wheels carry theirs), named in
# GPU_PACKAGES: docker build --target gpu --build-arg GPU_PACKAGES="torch==2.5.1" .
FROM runtime AS gpu
ARG GPU_PACKAGES=""
ENV NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility
USER root
RUN if [ -n "${GPU_PACKAGES}" ]; then pip install ${GPU_PACKAGES}; fi
USER 10001:10001

# --- the default target: the CPU image --------------------------------------------------
FROM runtime
