#!/usr/bin/env bash
# CTest driver for sdk_client_test.mjs: installs the pinned SDK with `npm ci` into WORK_DIR (kept
# between runs, redone when package-lock.json changes), then runs the test against PTYBOX.
#   run_sdk_client_test.sh SOURCE_DIR WORK_DIR PTYBOX [SCRIPT]  (default sdk_client_test.mjs)
set -euo pipefail
src=$1 work=$2 ptybox=$3 script=${4:-sdk_client_test.mjs}

for tool in node npm; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "SKIP: $tool is not installed; run scripts/install-deps.sh (it installs nodejs and npm)"
    exit 77
  fi
done

mkdir -p "$work"
cp "$src/package.json" "$src/package-lock.json" "$src/sdk_test_support.mjs" "$src/$script" "$work/"
stamp="$work/node_modules/.ptybox-package-lock.json"
if ! cmp -s "$src/package-lock.json" "$stamp"; then
  echo "npm ci (node $(node --version), npm $(npm --version)) into $work"
  npm ci --prefix "$work" --no-audit --no-fund --loglevel=error
  cp "$src/package-lock.json" "$stamp"
fi
exec node "$work/$script" "$ptybox"
