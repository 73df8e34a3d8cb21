#!/usr/bin/env bash
# The newcomer's command: installs what is missing, builds, and runs ptybox's main job: a
# sandboxed bash session in the current directory, driven over the real JSON-RPC protocol.
set -euo pipefail
here="$(pwd)"
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh"
echo
"$root/build/bin/ptybox" doctor || true
echo
exec "$root/build/bin/ptybox" demo --workspace "$here"
