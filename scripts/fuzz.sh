#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz) with clang-16 into build-fuzz/ and runs each for a
# bounded time; CI runs it after the test suite.
#   scripts/fuzz.sh [SECONDS] [TARGET...]   each target SECONDS long (default 60); default
#                                           targets: decoder line_reader rpc_request policy
#                                           proxy_request; FUZZ_JOBS of them at once (default:
#                                           the cores)
#   FUZZ_BUILD_ONLY=1 scripts/fuzz.sh       builds only; reproduce a crash with
#                                           build-fuzz/tests/fuzz/TARGET_fuzzer CRASH-FILE
#   FUZZ_ARGS="-jobs=2" scripts/fuzz.sh     extra libFuzzer flags
# Why clang-16: libFuzzer is clang's; clang 14 (Debian's default) cannot compile libstdc++ 12's
# <expected>, which clang 16 can (see cmake/CompilerQuirks.cmake), so the targets link the very
# libraries the program uses, Debian's yaml-cpp and libvterm included (uninstrumented; our
# code has coverage, ASan and UBSan). Needs clang-16 and libclang-rt-16-dev
# (PTYBOX_WITH_FUZZ=1 scripts/install-deps.sh installs them).
# A crash stops that target (the others still run) and the script fails; the input is left in
# build-fuzz/artifacts/TARGET/. Keep it as tests/fuzz/regressions/TARGET/NAME: ctest replays it.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:-60}
[[ $# -gt 0 ]] && shift
targets=("$@")
((${#targets[@]} == 0)) && targets=(decoder line_reader rpc_request policy proxy_request)
out=${FUZZ_DIR:-"$root/build-fuzz"}
cxx=${CXX_FUZZ:-clang++-16}

if ! command -v "$cxx" >/dev/null 2>&1; then
  echo "fuzz.sh: $cxx not found; install the Debian packages clang-16 and libclang-rt-16-dev" \
       "(or run PTYBOX_WITH_FUZZ=1 scripts/install-deps.sh)" >&2
  exit 1
fi

launcher=()
command -v ccache >/dev/null 2>&1 && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
if [[ ! -f "$out/CMakeCache.txt" ]]; then
  # Warnings stay warnings here: the g++ build is the one held to -Werror.
  cmake -S "$root" -B "$out" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_COMPILER="$cxx" "${launcher[@]}" -DPTYBOX_FUZZ=ON -DPTYBOX_WERROR=OFF >/dev/null
fi
cmake --build "$out" -j"$(nproc)" --target "${targets[@]/%/_fuzzer}"
[[ -n "${FUZZ_BUILD_ONLY:-}" ]] && exit 0

# libvterm answers an unknown DECRQSS with the format "0$r%.s": glibc reads no argument for a
# zero precision, but ASan's printf check takes the argument for a string and reads it, a false
# positive that would stop every decoder run at the first "ESC P $ q" the fuzzer invents.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}check_printf=0:print_stacktrace=1"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}print_stacktrace=1:halt_on_error=1"

# One target's run; its status is the run's. The summary lines go to stdout as one block.
fuzz_one() {
  local target=$1 dict=rpc.dict
  case "$target" in
    decoder) dict=decoder.dict ;;
    policy) dict=policy.dict ;;
  esac
  local corpus="$out/corpus/$target" artifacts="$out/artifacts/$target" status=0
  mkdir -p "$corpus" "$artifacts"
  echo "fuzz.sh: $target for $seconds s (corpus $corpus)"
  # The first directory collects what the run finds; the seeds and regressions are read only.
  # shellcheck disable=SC2086
  "$out/tests/fuzz/${target}_fuzzer" "$corpus" "$root/tests/fuzz/seeds/$target" \
    "$root/tests/fuzz/regressions/$target" -dict="$root/tests/fuzz/$dict" \
    -max_total_time="$seconds" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$artifacts/" ${FUZZ_ARGS:-} \
    >"$out/$target.log" 2>&1 || status=$?
  if ((status != 0)); then
    tail -n 60 "$out/$target.log" >&2
    echo "fuzz.sh: $target FAILED; inputs in $artifacts/:" >&2
    ls -l "$artifacts" >&2
  fi
  grep -E "^(stat::number_of_executed_units|stat::peak_rss_mb|#[0-9]+ +DONE)" "$out/$target.log" \
    | sed "s/^/fuzz.sh: $target: /" || true
  return "$status"
}

# Each libFuzzer run is one process on one core: FUZZ_JOBS targets (default: the cores) run at
# once, each still for its full time, so the step takes about targets/jobs x SECONDS.
jobs=${FUZZ_JOBS:-$(nproc)}
declare -A running=()  # pid -> target
failed=()
reap_one() {
  local pid status=0
  wait -n -p pid "${!running[@]}" || status=$?
  ((status != 0)) && failed+=("${running[$pid]}")
  unset "running[$pid]"
}
for target in "${targets[@]}"; do
  while ((${#running[@]} >= jobs)); do reap_one; done
  fuzz_one "$target" &
  running[$!]=$target
done
while ((${#running[@]} > 0)); do reap_one; done

if ((${#failed[@]} > 0)); then
  echo "fuzz.sh: crashes in: ${failed[*]}; keep each input as tests/fuzz/regressions/TARGET/NAME" >&2
  exit 1
fi
echo "fuzz.sh: every target ran $seconds s without a crash"
