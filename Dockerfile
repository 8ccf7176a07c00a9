# syntax=docker/dockerfile:1
# One image for every resetgate service; the chart picks the service with
# `python -m services.<name>` (admission, sender, poller, router, sandbox).
ARG PYTHON_IMAGE=python:3.11-slim

# --- builder: resolve and install the project and its dependencies into /opt/venv ----------
FROM ${PYTHON_IMAGE} AS builder
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /src
# Every dependency (redis/hiredis, aiohttp, orjson, uvloop, pydantic) ships manylinux
# wheels for CPython 3.11, so this stage needs no compiler.
COPY pyproject.toml ./
COPY services/ services/
COPY shared/ shared/
RUN pip install --upgrade pip && pip install .

# --- runtime: no build tools, no root ----------------------------------------------------
FROM ${PYTHON_IMAGE} AS runtime
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    RESETGATE_HTTP_PORT=8080
RUN groupadd --system --gid 10001 resetgate \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin resetgate
COPY --from=builder /opt/venv /opt/venv
# The source tree sits in the working directory, so `python -m services.<name>` imports it
# (Lua scripts included) exactly as tested; the venv carries the dependencies and the
# `resetgate` console script.
WORKDIR /app
COPY services/ services/
COPY shared/ shared/
# Numeric user so the kubelet can verify runAsNonRoot. The chart mounts the root
# filesystem read-only with an emptyDir on /tmp.
USER 10001:10001
EXPOSE 8080
CMD ["python", "-m", "services.admission"]
