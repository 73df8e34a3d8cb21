#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test: the README's second command and what CI
# runs (.ci/run). Cheapest and most telling first, so a failure shows early; each step prints
# its wall time (docs/ci.md, "ptybox's own CI", has the measured times and why these steps).
#   1. install-deps (with Node for the MCP SDK test, clang-16 for fuzzing, ccache)
#   1b. every C++ file as clang-format lays it out (scripts/check-format.sh)
#   2. build everything with ASan+UBSan (scripts/test-sanitized.sh build: build-asan/)
#   3. the whole test suite once, on that build: every sanitizer report fails it
#   4. the Release configuration the image and the package build (-O3, -Werror; no tests or
#      benchmarks: build-release/)
#   5. the Debian package of that build, installed, smoke-tested and purged: scripts/test-deb.sh
#   6. the Kubernetes manifests, validated offline: images/kubernetes/validate.sh
#   7. the container image built under Podman with that package and smoke-tested:
#      images/test-image.sh (PTYBOX_TEST_IMAGE=0 skips it)
#   8. every libFuzzer target for FUZZ_SECONDS (default 30) each: scripts/fuzz.sh
# PTYBOX_TEST_QUICK=1 is the developer's loop instead: the ordinary RelWithDebInfo build
# (scripts/build.sh: build/) and the whole suite on it, nothing else.
set -euo pipefail
cd "$(dirname "$0")/.."
# A fresh clone anywhere on a machine that built ptybox before takes ccache's hits: paths under
# the clone are hashed relative to it, and the working directory is not hashed (its debug line
# tables then name the first clone's directory; an absolute path a file compiles in, such as
# PTYBOX_SOURCE_DIR, is still part of its hash).
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1

step() {
  local name=$1
  shift
  local start=$SECONDS
  echo "=== test: $name"
  "$@"
  echo "=== test: $name passed in $((SECONDS - start)) s"
}

run_suite() {
  # Tests assert reasons and order, never durations, so running two at a time is safe.
  (cd build && ctest --output-on-failure -j2 --timeout 600) || {
    ./scripts/failure-summary.sh build >&2
    return 1
  }
}

step "dependencies" env PTYBOX_WITH_NODE=1 PTYBOX_WITH_FUZZ=1 ./scripts/install-deps.sh
if [[ "${PTYBOX_TEST_QUICK:-0}" == "1" ]]; then
  step "build (RelWithDebInfo)" ./scripts/build.sh
  step "test suite" run_suite
  echo "=== test: PTYBOX_TEST_QUICK=1: no sanitizers, no Release build, no fuzzing"
  exit 0
fi
step "format (clang-format --dry-run -Werror)" ./scripts/check-format.sh
step "build (ASan+UBSan)" ./scripts/test-sanitized.sh build
step "test suite (ASan+UBSan)" ./scripts/test-sanitized.sh test
step "build (Release, as the image)" env BUILD_DIR=build-release BUILD_TYPE=Release \
  ./scripts/build.sh -DPTYBOX_BUILD_TESTS=OFF -DPTYBOX_BUILD_BENCH=OFF
step "Debian package (install, smoke test, purge)" ./scripts/test-deb.sh build-release
step "Kubernetes manifests (offline schema validation)" ./images/kubernetes/validate.sh
if [[ "${PTYBOX_TEST_IMAGE:-1}" == "1" ]]; then
  step "container image (Podman: build, smoke test)" ./images/test-image.sh --deb build-release
fi
step "fuzz (${FUZZ_SECONDS:-30} s per target)" ./scripts/fuzz.sh "${FUZZ_SECONDS:-30}"
echo "=== test: every step passed in $SECONDS s"
