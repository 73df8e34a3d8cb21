#!/usr/bin/env bash
# Builds everything with AddressSanitizer + UndefinedBehaviorSanitizer into build-asan/ and runs
# the whole test suite on it. This is the one suite run of CI (scripts/test.sh, steps 2 and 3).
#   scripts/test-sanitized.sh [all|build|test]     (default all; ASAN_DIR overrides build-asan)
# Every sanitizer report fails the run: the instrumented processes (tests, the daemon, `ptybox
# run`, their forked children) stop at the first report, and each report is also written to
# build-asan/sanitizer-logs/, which must stay empty, so a report from a child whose exit status
# no test looks at still fails CI. ptybox-init runs inside the sandbox with an empty environment
# and cannot reach that directory: its options are built in (sandbox/init/init_sanitizer_options.cc) and
# its reports go to its stderr, which the daemon and `ptybox run` pass on (docs/ci.md).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${ASAN_DIR:-build-asan}
action=${1:-all}
case "$action" in
  all | build | test) ;;
  *) echo "usage: $0 [all|build|test]" >&2; exit 2 ;;
esac

if [[ "$action" != test ]]; then
  launcher=()
  command -v ccache >/dev/null 2>&1 && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  if [[ ! -f "$out/CMakeCache.txt" ]]; then
    # Benchmarks are not built: nothing runs them here, and they cost build time.
    cmake -S . -B "$out" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${launcher[@]}" \
      -DPTYBOX_SANITIZE=address,undefined -DPTYBOX_BUILD_BENCH=OFF >/dev/null
  fi
  cmake --build "$out" -j"$(nproc)"
fi
[[ "$action" == build ]] && exit 0

logs="$PWD/$out/sanitizer-logs"
rm -rf "$logs"
mkdir -p "$logs"
chmod 1777 "$logs"  # the unprivileged-daemon runs write here too
# detect_leaks: a leak in a test, the daemon or a child that returns from main is a report.
#   Children that exec or leave with _exit are not checked (LSan runs at exit), as intended.
# abort_on_error=0 / exitcode: a report ends the process with a failing status, not SIGABRT,
#   so the daemon's parent sees a plain failure.
# log_path: each process's report also goes to its own file (asan.PID) under $logs.
# quarantine_size_mb=16 (default 256): the last 16 MiB freed are still kept from reuse, but the
#   daemon's address space stays small, and every run of the host's git it starts copies that
#   address space once (its keeper; git itself is vfork'd from it: sandbox/captured_run.cc):
#   with 256 MiB, and two copies, the Git for agents suites spent most of their time in those
#   copies (GitReview30AttackTest's stash fill, about 12,000 runs of git: 397 s against 196 s,
#   nearly all of it system time; one copy since: 225 s against 142 s).
# check_printf=0: libvterm 0.1.4 answers an unknown DECRQSS (`ESC P $ q # ESC \`, a regression
#   input of the decoder) with the format "0$r%.s" and an int argument: glibc reads nothing for a
#   zero precision, but ASan's printf check takes the int for a string pointer and faults in
#   its own strlen (a SEGV, which no suppression file can cover; scripts/fuzz.sh does the same).
#   What it turns off is narrow in effect: every printf format in ptybox is a literal that
#   -Wformat=2 checks at compile time.
export ASAN_OPTIONS="check_printf=0:detect_leaks=1:halt_on_error=1:abort_on_error=0:print_stacktrace=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1:quarantine_size_mb=16:log_path=$logs/asan"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:log_path=$logs/ubsan"
export LSAN_OPTIONS="print_suppressions=0"

status=0
(cd "$out" && ctest --output-on-failure -j2 --timeout 900) || status=$?

if compgen -G "$logs/*" >/dev/null; then
  echo "test-sanitized: sanitizer reports:" >&2
  for f in "$logs"/*; do
    echo "=== $f" >&2
    head -n 80 "$f" >&2
  done
  status=1
fi
if ((status != 0)); then
  ./scripts/failure-summary.sh "$out" >&2
  echo "test-sanitized: FAILED (ASan+UBSan)" >&2
  exit "$status"
fi
echo "test-sanitized: the whole suite passed under ASan+UBSan with no report"
