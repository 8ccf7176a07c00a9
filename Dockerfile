# syntax=docker/dockerfile:1
# One image for every resetgate service; the chart picks the service with
# `python -m services.<name>` (admission, sender, poller, router, sandbox).
#
# Reproducible: the base is pinned by digest (the multi-arch index of python:3.11-slim, so
# linux/amd64 and linux/arm64 builds start from the same release), the dependencies are
# exactly requirements.lock (hash-checked; tools/lock-image.sh regenerates it), and the code
# is byte-compiled without timestamps. To move the base: `docker buildx imagetools inspect
# python:3.11-slim` and put the index digest here.
ARG PYTHON_IMAGE=python:3.11-slim@sha256:9c900dea9e8fb7e16277c179b555cc72d29a352dbc33cff48ad5a0412fd5bfc7

# --- builder: the venv and the compiled code; tools/image-install.sh holds the steps (tests/image replays them)
FROM ${PYTHON_IMAGE} AS builder
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
COPY tools/image-install.sh /usr/local/bin/image-install
# Dependencies first, in their own layer: rebuilt only when the lock changes. Every locked
# dependency ships manylinux wheels for CPython 3.11 (--only-binary), so no compiler.
COPY requirements.lock /src/requirements.lock
RUN image-install deps /opt/venv /src/requirements.lock
# Then the code (the only copy ends up in /app).
COPY services/ /src/services/
COPY shared/ /src/shared/
RUN image-install app /opt/venv /src /app

# --- runtime: no build tools, no root ----------------------------------------------------
FROM ${PYTHON_IMAGE} AS runtime
ARG VERSION=0.1.0
ARG REVISION=unknown
LABEL org.opencontainers.image.title="resetgate" \
      org.opencontainers.image.description="Password-reset email delivery: admission, sender, poller, router" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.base.name="docker.io/library/python:3.11-slim"
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    RESETGATE_HTTP_PORT=8080
RUN groupadd --system --gid 10001 resetgate \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin resetgate
COPY --from=builder /opt/venv /opt/venv
COPY --from=builder /app /app
WORKDIR /app
# Numeric user so the kubelet can verify runAsNonRoot. The chart mounts the root
# filesystem read-only with an emptyDir on /tmp.
USER 10001:10001
EXPOSE 8080
CMD ["python", "-m", "services.admission"]
