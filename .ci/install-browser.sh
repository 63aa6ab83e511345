#!/bin/sh
# Install Debian's chromium for the report's headless-browser test, once.
# Idempotent: does nothing when /usr/bin/chromium (or $HARNESS_CHROMIUM) is already there.
set -eu

if [ -n "${HARNESS_CHROMIUM:-}" ] && [ -x "${HARNESS_CHROMIUM}" ]; then
    echo "chromium: using ${HARNESS_CHROMIUM}"
    exit 0
fi
if [ -x /usr/bin/chromium ]; then
    echo "chromium: already installed ($(/usr/bin/chromium --version 2>/dev/null || echo unknown version))"
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "chromium: apt-get not found; install chromium yourself or set HARNESS_CHROMIUM (the browser test is skipped otherwise)" >&2
    exit 1
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO="sudo"
    else
        echo "chromium: need root (or sudo) to apt-get install chromium" >&2
        exit 1
    fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends chromium
/usr/bin/chromium --version
