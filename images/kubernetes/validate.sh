#!/usr/bin/env bash
# Validates images/kubernetes/*.yaml offline against the Kubernetes API schema (scripts/test.sh,
# step "kubernetes manifests"). Needs Node.js >= 14 and npm (Debian: apt-get install nodejs npm);
# installs the pinned validator (validate/package-lock.json) from the npm registry once.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$here/validate"
if [[ ! -d node_modules/kubernetes-models || package-lock.json -nt node_modules ]]; then
  timeout 300 npm ci --no-audit --no-fund --loglevel=error
  touch node_modules
fi
exec timeout 120 node validate.mjs "$here"/*.yaml
