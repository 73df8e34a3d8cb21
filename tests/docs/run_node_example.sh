#!/usr/bin/env bash
# CTest driver for examples/client.mjs: skips (77) without node, tsc or npm; else compiles a
# copy of clients/typescript (tsc -p), installs it with npm into SCRATCH/project as the
# example's header says, and runs the example from there against PTYBOX, in the current
# directory (the example's workspace).
#   run_node_example.sh CLIENT_MJS PTYBOX CLIENT_PACKAGE SCRATCH
set -euo pipefail
for tool in node tsc npm; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "SKIP: $tool is not installed; run PTYBOX_WITH_NODE=1 scripts/install-deps.sh"
    exit 77
  fi
done
example=$1 ptybox=$2 package=$3 scratch=$4
rm -rf "$scratch"
mkdir -p "$scratch/project"
cp -r "$package" "$scratch/package"
rm -rf "$scratch/package/dist" "$scratch/package/node_modules"
tsc -p "$scratch/package"
echo '{"name": "example", "private": true, "type": "module"}' >"$scratch/project/package.json"
(cd "$scratch/project" && npm install --offline --no-audit --no-fund --loglevel=error "$scratch/package")
cp "$example" "$scratch/project/client.mjs"
exec node "$scratch/project/client.mjs" "$ptybox"
