# syntax=docker/dockerfile:1
# Two images from one file:
#   docker build -t aiokcm .                       production: the manager only, the last stage
#   docker build --target demo -t aiokcm:demo .    the manager plus the embedded local cluster:
#                                                  docker run --rm -p 10257:10257 aiokcm:demo
# Build stages hold the compilers and pip; each final stage gets only a self-contained virtualenv,
# no source tree. The production image has no `localcluster` at all (not copied, installed without
# the `embedded` extra), so `aiokcm run --embedded` there exits 2 with one line pointing at the demo.

# Compilers, the virtualenv and the product's sources, shared by both builds.
FROM python:3.11-slim AS build-base
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN apt-get update \
 && apt-get install -y --no-install-recommends build-essential \
 && rm -rf /var/lib/apt/lists/*
RUN python -m venv /opt/aiokcm \
 && /opt/aiokcm/bin/pip install --upgrade pip
WORKDIR /src
COPY pyproject.toml README.md ./
COPY apiclient ./apiclient
COPY kubeutil ./kubeutil
COPY workqueue ./workqueue
COPY informers ./informers
COPY nodemaintenancelease ./nodemaintenancelease
COPY evictionapi ./evictionapi
COPY controllers ./controllers
COPY controller_manager ./controller_manager

# The demo build: the local cluster and the packages only it needs (the `embedded` extra).
FROM build-base AS build-demo
COPY localcluster ./localcluster
RUN /opt/aiokcm/bin/pip install '.[embedded]' \
 && /opt/aiokcm/bin/python -m compileall -q /opt/aiokcm

# The production build: the product packages only.
FROM build-base AS build-production
RUN /opt/aiokcm/bin/pip install . \
 && /opt/aiokcm/bin/python -m compileall -q /opt/aiokcm

# What both final images share: slim Python and an unprivileged user; no compilers, no pip cache.
FROM python:3.11-slim AS runtime
LABEL org.opencontainers.image.title="aiokcm"
ENV PATH=/opt/aiokcm/bin:$PATH PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
RUN groupadd --system --gid 10001 aiokcm \
 && useradd --system --uid 10001 --gid aiokcm --no-create-home --shell /usr/sbin/nologin aiokcm
WORKDIR /tmp
EXPOSE 10257
ENTRYPOINT ["aiokcm"]

# `docker run aiokcm:demo` narrates a zero-downtime drain on an in-process cluster; the CRD comes
# from the package data, the kubeconfig goes to /tmp.
FROM runtime AS demo
LABEL org.opencontainers.image.description="aiokcm with its embedded local cluster, for demos"
COPY --from=build-demo /opt/aiokcm /opt/aiokcm
USER 10001:10001
CMD ["run", "--embedded"]

# Last, so a plain `docker build .` yields it: what deploy/deployment.yaml runs.
FROM runtime AS production
LABEL org.opencontainers.image.description="An asyncio controller manager for declarative node maintenance"
COPY --from=build-production /opt/aiokcm /opt/aiokcm
USER 10001:10001
CMD ["run"]
