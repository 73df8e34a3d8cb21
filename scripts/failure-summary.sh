#!/usr/bin/env bash
# Prints, after a failed ctest run, each failing gtest case with the lines around its failures,
# from BUILD_DIR's Testing/Temporary/LastTest.log. It runs last, so that what a CI system keeps of
# the end of its output names the cause, not only the test (ctest's own output of a failing test
# is long and comes before the rest of the run).
#   scripts/failure-summary.sh BUILD_DIR [MAX_LINES]    (default 200 lines at most)
set -uo pipefail
dir=${1:?usage: failure-summary.sh BUILD_DIR [MAX_LINES]}
max=${2:-200}
log="$dir/Testing/Temporary/LastTest.log"
failed="$dir/Testing/Temporary/LastTestsFailed.log"
[[ -s "$failed" && -r "$log" ]] || exit 0
echo "=== failure summary (from $log)"
# A section of LastTest.log runs from "N/M Test: NAME" to "Test Failed."/"Test Passed.". Within a
# failing one: every "Failure" line and the 12 after it, and gtest's "[  FAILED  ]" lines.
awk -v max="$max" '
  BEGIN { while ((getline line < ARGV[2]) > 0) { sub(/^[0-9]+:/, "", line); bad[line] = 1 }
          ARGV[2] = "" }
  /^[0-9]+\/[0-9]+ Test: / { name = $0; sub(/^[0-9]+\/[0-9]+ Test: /, "", name); show = (name in bad)
                            left = 0; if (show) print "--- " name; next }
  !show { next }
  printed >= max { next }
  /Failure$|Failure |^\[  FAILED  \]|ERROR: AddressSanitizer|runtime error:/ { left = 13 }
  left > 0 { print; printed++; left-- }
' "$log" "$failed"
