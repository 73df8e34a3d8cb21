#!/bin/sh
# Builds the terminal decoder's libFuzzer target with clang (-fsanitize=fuzzer,address,undefined)
# against just the decoder sources, not through the main g++ CMake build, and runs it.
# Usage: scripts/fuzz.sh [SECONDS] [extra libFuzzer flags...]   (default 60 seconds)
#        FUZZ_BUILD_ONLY=1 scripts/fuzz.sh     builds build-fuzz/decoder_fuzzer only; run it on a
#        crash file to reproduce: build-fuzz/decoder_fuzzer build-fuzz/artifacts/crash-...
# Needs clang++ (Debian: clang) and libFuzzer's runtime (Debian: libclang-rt-14-dev), libvterm-dev.
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:-60}
[ $# -gt 0 ] && shift
out=${FUZZ_DIR:-"$root/build-fuzz"}
cxx=${CXX_FUZZ:-clang++}

if ! command -v "$cxx" >/dev/null 2>&1; then
  echo "fuzz.sh: $cxx not found; install the Debian package 'clang' (apt-get install clang)" >&2
  exit 1
fi
mkdir -p "$out/corpus" "$out/artifacts"

# The decoder sources must not include common/error.h or <expected>: clang 14 cannot use
# libstdc++ 12's <expected>.
sources="backend/vt_parser.cc backend/line_model.cc backend/scrollback.cc
         backend/send_capture.cc backend/screen.cc backend/terminal_decoder.cc
         tests/fuzz/decoder_fuzzer.cc"
cd "$root"
# shellcheck disable=SC2086
"$cxx" -std=c++2b -O1 -g -fno-omit-frame-pointer \
  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  -I"$root" $sources $(pkg-config --cflags --libs vterm) -o "$out/decoder_fuzzer"

[ -n "${FUZZ_BUILD_ONLY:-}" ] && exit 0

# Seeds: a few real-looking outputs.
seed() { printf "$2" > "$out/corpus/seed-$1"; }
seed ls '\120\040\060\001\010\000\033[0m\033[01;34mdir\033[0m  \033[01;32mrun.sh\033[0m\r\n'
seed progress '\050\030\100\002\020\003downloading 10%%\r20%%\r\033[K30%%\r\n$ '
seed readline '\012\005\200\010\040\040$ echo 012 \r3456\r\033[K78\r\n'
seed vim '\120\030\100\040\010\004\033[?1049h\033[1;5r\033[H\033[2J~\r\n~\033[5;1H\033[7m"a.c"\033[m\033[6n\033[?1049l'
seed utf8 '\100\010\100\010\010\010caf\303\251 \346\227\245\346\234\254 \360\237\230\200 e\314\201 \377\300\257\355\240\200\r\n'
seed osc '\100\010\100\001\010\000\033]0;title\007\033]133;A\033\\$ \033Pq#0\033\\ok\n'

# libvterm answers an unknown DECRQSS with the format "0$r%.s": glibc reads no argument for a
# zero precision, but ASan's printf check takes the argument for a string and reads it, a false
# positive that would stop every run at the first "ESC P $ q" the fuzzer invents.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}check_printf=0"

echo "fuzz.sh: running $out/decoder_fuzzer for $seconds s (corpus $out/corpus)"
exec "$out/decoder_fuzzer" "$out/corpus" -dict="$root/tests/fuzz/decoder.dict" \
  -max_total_time="$seconds" -max_len=4096 -timeout=10 -print_final_stats=1 \
  -artifact_prefix="$out/artifacts/" "$@"
