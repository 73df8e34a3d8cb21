// ptybox: the command line (serve, mcp, run, policy, doctor). Placeholder until the CLI lands.
#include <cstdio>

int main() {
  std::fputs("ptybox: not built yet\n", stderr);
  return 1;
}
