# syntax=docker/dockerfile:1
# Build stage: compilers and pip live here only; the result is a self-contained virtualenv.
FROM python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN apt-get update \
 && apt-get install -y --no-install-recommends build-essential \
 && rm -rf /var/lib/apt/lists/*
RUN python -m venv /opt/aiokcm
WORKDIR /src
COPY pyproject.toml README.md ./
COPY apiclient ./apiclient
COPY kubeutil ./kubeutil
COPY workqueue ./workqueue
COPY informers ./informers
COPY nodemaintenancelease ./nodemaintenancelease
COPY controllers ./controllers
COPY controller_manager ./controller_manager
COPY localcluster ./localcluster
RUN /opt/aiokcm/bin/pip install --upgrade pip \
 && /opt/aiokcm/bin/pip install . \
 && /opt/aiokcm/bin/python -m compileall -q /opt/aiokcm

# Final stage: slim Python, the virtualenv, an unprivileged user; no compilers, no pip cache.
FROM python:3.11-slim
LABEL org.opencontainers.image.title="aiokcm" \
      org.opencontainers.image.description="An asyncio controller manager for declarative node maintenance"
ENV PATH=/opt/aiokcm/bin:$PATH PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
COPY --from=build /opt/aiokcm /opt/aiokcm
RUN groupadd --system --gid 10001 aiokcm \
 && useradd --system --uid 10001 --gid aiokcm --no-create-home --shell /usr/sbin/nologin aiokcm
USER 10001:10001
EXPOSE 10257
ENTRYPOINT ["aiokcm"]
CMD ["run"]
