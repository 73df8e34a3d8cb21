# PTYBOX_SANITIZE: the whole build (libraries, programs, tests) with the named sanitizers;
# every report stops the process (no recovery), so a report fails the test that caused it.
# PTYBOX_FUZZ: coverage instrumentation for libFuzzer plus ASan+UBSan everywhere; the fuzz
# targets themselves add -fsanitize=fuzzer (tests/fuzz/CMakeLists.txt).
if(PTYBOX_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "ptybox: PTYBOX_FUZZ needs clang (libFuzzer); configure with "
                        "-DCMAKE_CXX_COMPILER=clang++-16 (Debian 12: apt-get install clang-16 "
                        "libclang-rt-16-dev), as scripts/fuzz.sh does")
  endif()
  set(PTYBOX_SANITIZE "address,undefined")
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()

if(PTYBOX_SANITIZE)
  add_compile_options(-fsanitize=${PTYBOX_SANITIZE} -fno-sanitize-recover=all
                      -fno-omit-frame-pointer)
  add_link_options(-fsanitize=${PTYBOX_SANITIZE} -fno-sanitize-recover=all)
  # The build type's -O3/-O2 make reports hard to read and ASan's slow path slower still.
  # -g1 (line tables: every report's stack still names functions, files and lines) instead of
  # -g compiles a quarter faster (runtime/methods.cc: 16.4 s of CPU against 22.2 s; docs/ci.md).
  add_compile_options(-O1 -g1)
endif()
