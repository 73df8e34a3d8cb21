#!/usr/bin/env bash
# Every C++ file git tracks is laid out as clang-format (Debian 12's, version 14) lays it out
# with the repository's .clang-format; the first file that differs fails the check with the
# lines that differ. Fix with: git ls-files -z '*.cc' '*.h' | xargs -0 clang-format -i
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v clang-format >/dev/null; then
  echo "check-format: clang-format is not installed (PTYBOX_WITH_FUZZ=1 ./scripts/install-deps.sh installs it)" >&2
  exit 1
fi
git ls-files -z '*.cc' '*.h' | xargs -0 clang-format --dry-run -Werror
echo "check-format: $(git ls-files '*.cc' '*.h' | wc -l) files as clang-format $(clang-format --version | grep -o '[0-9][0-9.]*' | head -1) lays them out"
