#!/usr/bin/env bash
# The side-by-side benchmarks (issue "Performance"): installs the baselines (python3-pexpect,
# tmux, valgrind, strace), builds the Release configuration into build-release/, profiles the send
# path, runs every case and writes docs/benchmarks.md. Never part of the test command: timings
# depend on the machine and its load, so run it on a quiet machine.
#   scripts/bench.sh            the full run (about 5 minutes on 2 cores)
#   scripts/bench.sh --quick    a smoke run with few samples, written to stdout only
set -euo pipefail
cd "$(dirname "$0")/.."
PTYBOX_WITH_BENCH=1 ./scripts/install-deps.sh
BUILD_DIR=build-release BUILD_TYPE=Release ./scripts/build.sh \
  -DPTYBOX_BUILD_TESTS=OFF -DPTYBOX_BUILD_BENCH=OFF >/dev/null
binary=build-release/bin/ptybox
if [[ "${1:-}" == "--quick" ]]; then
  exec /usr/bin/python3 bench/compare.py --ptybox "$binary" --quick --sessions 32 --out -
fi
profile=$(mktemp /tmp/ptybox-profile-XXXXXX.md)
trap 'rm -f "$profile"' EXIT
/usr/bin/python3 bench/profile_send.py --ptybox "$binary" --out "$profile"
/usr/bin/python3 bench/compare.py --ptybox "$binary" --profile "$profile" --out docs/benchmarks.md
echo "bench: wrote docs/benchmarks.md"
