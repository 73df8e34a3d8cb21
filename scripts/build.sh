#!/usr/bin/env bash
# Configures and builds ptybox into build/ (Release with debug info, warnings as errors).
#   BUILD_DIR=build-release BUILD_TYPE=Release scripts/build.sh [extra cmake -D options]
# builds another configuration (the extra options apply when the directory is first configured).
#   TARGETS="ptybox ptybox-init" scripts/build.sh
# builds only those targets (and what they need), as scripts/demo.sh does.
# Uses ccache when it is installed.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${BUILD_DIR:-build}
type=${BUILD_TYPE:-RelWithDebInfo}
generator=()
command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
launcher=()
command -v ccache >/dev/null 2>&1 && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
if [[ ! -f "$dir/CMakeCache.txt" ]]; then
  cmake -S . -B "$dir" "${generator[@]}" -DCMAKE_BUILD_TYPE="$type" "${launcher[@]}" "$@"
fi
targets=()
for target in ${TARGETS:-}; do targets+=(--target "$target"); done
cmake --build "$dir" -j"$(nproc)" "${targets[@]}"
