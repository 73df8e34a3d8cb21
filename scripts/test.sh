#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test (the command CI runs, via .ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."
PTYBOX_WITH_NODE=1 ./scripts/install-deps.sh
./scripts/build.sh
cd build
# Tests assert reasons and order, never durations, so running two at a time is safe.
ctest --output-on-failure -j2 --timeout 600
