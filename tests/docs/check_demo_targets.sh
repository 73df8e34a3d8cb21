#!/usr/bin/env bash
# scripts/demo.sh builds only what the demo runs (ptybox and ptybox-init), not the test suite:
# build.sh is run as demo.sh runs it, with a stand-in `cmake` on PATH that records its
# arguments, in a copy of scripts/ (so no build tree is touched).
#   check_demo_targets.sh SOURCE_DIR
set -euo pipefail
source_dir=$1
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/repo/scripts" "$scratch/bin" "$scratch/repo/build"
cp "$source_dir/scripts/build.sh" "$scratch/repo/scripts/"
touch "$scratch/repo/build/CMakeCache.txt"  # configured already: only the build step runs
printf '#!/bin/sh\necho "$@" >>"%s/calls"\n' "$scratch" >"$scratch/bin/cmake"
chmod +x "$scratch/bin/cmake"
# The line of demo.sh that builds, run as it is written there.
line=$(grep -E '^[A-Z_]+=.*scripts/build\.sh' "$source_dir/scripts/demo.sh") ||
  { echo "FAILED: scripts/demo.sh has no line that runs scripts/build.sh with TARGETS"; exit 1; }
root=$scratch/repo PATH="$scratch/bin:$PATH" bash -c "root=$scratch/repo; $line"
calls=$(cat "$scratch/calls")
[[ $calls == "--build build -j"*" --target ptybox --target ptybox-init" ]] ||
  { echo "FAILED: demo.sh's build ran: cmake $calls"; exit 1; }
echo "demo.sh builds only: cmake $calls"
