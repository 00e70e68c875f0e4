#!/usr/bin/env bash
# Installs Debian's prometheus and prometheus-alertmanager when either is missing from PATH: the
# rolling maintenance's gate tests (tests/maintenancerollout) run against the real servers, each
# started by the tests on free ports. Idempotent; on a fresh machine it needs root (or sudo).
# Usage: tests/support/install-monitoring.sh
set -euo pipefail
if command -v prometheus >/dev/null && command -v prometheus-alertmanager >/dev/null; then
  exit 0
fi
sudo=""
if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null; then sudo=sudo; fi
{
  $sudo apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus prometheus-alertmanager
} >&2
