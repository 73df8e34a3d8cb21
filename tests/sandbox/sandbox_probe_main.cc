// ptybox-sandbox-probe: runs each probe named on the command line in its own child and prints
// one line per probe (see FormatProbeLine). Started inside real sandboxes by the tests (as the
// "init binary" of the bwrap argv) and, later, by the escape suite.
#include <cstdio>
#include <string>

#include "tests/sandbox/syscall_probes.h"

int main(int argc, char** argv) {
  using namespace ptybox::sandbox::testing;
  if (argc < 2) {
    std::fputs("usage: ptybox-sandbox-probe PROBE[:ARG]...\nprobes:", stderr);
    for (auto name : ProbeNames()) std::fprintf(stderr, " %.*s", int(name.size()), name.data());
    std::fputs("\n", stderr);
    return 2;
  }
  for (int i = 1; i < argc; ++i) {
    const std::string line = FormatProbeLine(argv[i], RunProbeInChild(argv[i]));
    std::fwrite(line.data(), 1, line.size(), stdout);
    std::fflush(stdout);
  }
  return 0;
}
