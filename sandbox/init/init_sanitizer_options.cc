// Sanitized builds only (PTYBOX_SANITIZE; sandbox/CMakeLists.txt adds this file to ptybox-init):
// the options ptybox-init's sanitizer runtime starts with, since no ASAN_OPTIONS reaches it (the
// launcher starts bwrap and ptybox-init with an empty environment) and it runs under ptybox's
// own seccomp filter, which refuses ptrace. LeakSanitizer stops the process's threads with
// ptrace at exit, so in a confined session it could only fail ("LeakSanitizer has encountered a
// fatal error" on stderr at every exit, which `ptybox run` passes on): leak checking is off for
// this one program, by design of the sandbox, not to hide a leak. Every memory error and every
// undefined behaviour still stops it, with the report on its stderr (docs/ci.md).

extern "C" const char* __asan_default_options() {
  return "detect_leaks=0:halt_on_error=1:abort_on_error=0:print_stacktrace=1";
}

extern "C" const char* __ubsan_default_options() { return "halt_on_error=1:print_stacktrace=1"; }
