# Every third-party dependency comes from a Debian package. A missing one stops the build
# with the package to install; scripts/install-deps.sh installs them all.
include(CheckIncludeFileCXX)
find_package(PkgConfig QUIET)

function(ptybox_missing what package)
  message(FATAL_ERROR
    "ptybox: ${what} was not found. Install the Debian package '${package}' "
    "(as root: apt-get install ${package}), or run scripts/install-deps.sh, which installs "
    "every build dependency.")
endfunction()

if(NOT PkgConfig_FOUND)
  ptybox_missing("pkg-config" "pkg-config")
endif()

pkg_check_modules(SECCOMP QUIET IMPORTED_TARGET libseccomp)
if(NOT SECCOMP_FOUND)
  ptybox_missing("libseccomp (libseccomp.pc)" "libseccomp-dev")
endif()
pkg_check_modules(LIBCAP QUIET IMPORTED_TARGET libcap)
if(NOT LIBCAP_FOUND)
  ptybox_missing("libcap (libcap.pc)" "libcap-dev")
endif()
pkg_check_modules(VTERM QUIET IMPORTED_TARGET vterm)
if(NOT VTERM_FOUND)
  ptybox_missing("libvterm (vterm.pc)" "libvterm-dev")
endif()

# terminal_send/terminal_wait `pattern`: RE2 matches in linear time with bounded memory.
pkg_check_modules(RE2 QUIET IMPORTED_TARGET re2)
if(NOT RE2_FOUND)
  ptybox_missing("RE2 (re2.pc)" "libre2-dev")
endif()

# The git copy-back checks every loose object against its name (sandbox/git_objects.cc): zlib
# inflates it, libcrypto hashes it (SHA-1 or SHA-256, as the repository names its objects).
pkg_check_modules(ZLIB QUIET IMPORTED_TARGET zlib)
if(NOT ZLIB_FOUND)
  ptybox_missing("zlib (zlib.pc)" "zlib1g-dev")
endif()
pkg_check_modules(LIBCRYPTO QUIET IMPORTED_TARGET libcrypto)
if(NOT LIBCRYPTO_FOUND)
  ptybox_missing("OpenSSL's libcrypto (libcrypto.pc)" "libssl-dev")
endif()

find_package(yaml-cpp QUIET)
if(NOT yaml-cpp_FOUND)
  ptybox_missing("yaml-cpp" "libyaml-cpp-dev")
endif()
if(NOT TARGET yaml-cpp::yaml-cpp)
  add_library(yaml-cpp::yaml-cpp ALIAS yaml-cpp)
endif()

find_package(nlohmann_json 3.10 QUIET)
if(NOT nlohmann_json_FOUND)
  ptybox_missing("nlohmann-json" "nlohmann-json3-dev")
endif()

find_package(CLI11 QUIET)
if(NOT CLI11_FOUND)
  ptybox_missing("CLI11" "libcli11-dev")
endif()

check_include_file_cxx(asio.hpp PTYBOX_HAVE_ASIO)
if(NOT PTYBOX_HAVE_ASIO)
  ptybox_missing("standalone Asio (asio.hpp)" "libasio-dev")
endif()
add_library(ptybox_asio INTERFACE)
# ASIO_HAS_STD_ALIGNED_ALLOC: asio decides between aligned_alloc/free and operator new/delete
# for its handler memory from _GLIBCXX_HAVE_ALIGNED_ALLOC, which is only defined once a standard
# header was included; a file that includes asio first got operator new, the others
# aligned_alloc, and the linker kept one aligned_new and another aligned_delete (an ODR
# violation: ASan's alloc-dealloc-mismatch in the daemon). Stating it makes every file agree.
target_compile_definitions(ptybox_asio INTERFACE ASIO_STANDALONE ASIO_NO_DEPRECATED
                                                 ASIO_HAS_STD_ALIGNED_ALLOC=1)
find_package(Threads REQUIRED)
target_link_libraries(ptybox_asio INTERFACE Threads::Threads)

if(PTYBOX_BUILD_TESTS)
  find_package(GTest QUIET)
  if(NOT GTest_FOUND)
    ptybox_missing("GoogleTest" "googletest")
  endif()
endif()
if(PTYBOX_BUILD_BENCH)
  find_package(benchmark QUIET)
  if(NOT benchmark_FOUND)
    ptybox_missing("Google Benchmark" "libbenchmark-dev")
  endif()
endif()

find_program(PTYBOX_BWRAP_AT_BUILD bwrap)
if(NOT PTYBOX_BWRAP_AT_BUILD)
  message(WARNING "ptybox: bwrap was not found: confined sessions will fail with "
                  "sandbox_unavailable until the Debian package 'bubblewrap' is installed.")
endif()
