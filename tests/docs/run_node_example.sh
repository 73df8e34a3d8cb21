#!/usr/bin/env bash
# CTest driver for examples/client.mjs: skips (77) without node, else runs it against PTYBOX.
#   run_node_example.sh CLIENT_MJS PTYBOX
set -euo pipefail
if ! command -v node >/dev/null 2>&1; then
  echo "SKIP: node is not installed; run PTYBOX_WITH_NODE=1 scripts/install-deps.sh"
  exit 77
fi
exec node "$1" "$2"
