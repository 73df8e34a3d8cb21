# Narrow workarounds for known compiler bugs, each limited to the compilers and configurations
# that have it.

# GCC 12 warns falsely with -Wrestrict inside libstdc++'s std::string (operator+, assign,
# insert) once -O3 inlines it: GCC bug 105651 ("Bogus -Wrestrict on std::string operator+"),
# and the related 105329. With -Werror that stops the Release build (seen at
# policy/layering.cc, sandbox/init_main.cc, runtime/mcp_server.cc). Only the optimizing
# configurations that inline that far (Release: -O3; MinSizeRel) get -Wno-restrict, and only
# with GCC 12; the debug and RelWithDebInfo builds, and every other compiler, keep the warning.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_GREATER_EQUAL 12
   AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  add_compile_options($<$<CONFIG:Release,MinSizeRel>:-Wno-restrict>)
endif()

# libstdc++ 12 declares std::expected (common/error.h) only when __cpp_concepts >= 202002L.
# clang 16 implements what that test guards (P0848, conditionally trivial special members)
# but still reports 201907L (clang 19 raised it), so <expected> looks empty to clang 16-18.
# The fuzz build (PTYBOX_FUZZ, clang-16 from Debian 12) states the value it supports.
if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang" AND CMAKE_CXX_COMPILER_VERSION VERSION_GREATER_EQUAL 16
   AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 19)
  add_compile_options(-U__cpp_concepts -D__cpp_concepts=202002L)
elseif(CMAKE_CXX_COMPILER_ID STREQUAL "Clang" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 16)
  message(FATAL_ERROR "ptybox: clang ${CMAKE_CXX_COMPILER_VERSION} cannot compile libstdc++'s "
                      "<expected>; use clang 16 or later (Debian 12: apt-get install clang-16) "
                      "or g++ 12")
endif()
