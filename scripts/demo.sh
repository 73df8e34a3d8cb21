#!/usr/bin/env bash
# The newcomer's command: installs what is missing, builds, and runs ptybox's main job: a
# sandboxed bash session in the current directory, driven over the real JSON-RPC protocol.
set -euo pipefail
here="$(pwd)"
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/install-deps.sh"
# Only what the demo runs: the binary and its in-sandbox helper, not the test suite (minutes of
# compiling on a small machine).
TARGETS="ptybox ptybox-init" "$root/scripts/build.sh"
echo
"$root/build/bin/ptybox" doctor || true
echo
exec "$root/build/bin/ptybox" demo --workspace "$here"
