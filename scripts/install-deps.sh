#!/usr/bin/env bash
# Installs every Debian package ptybox needs to build, test and run, and nothing when all are
# present (idempotent). Run as root on Debian 12. Used by both README commands and .ci/run.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  bubblewrap
  libseccomp-dev libcap-dev libyaml-cpp-dev nlohmann-json3-dev libasio-dev libcli11-dev
  libvterm-dev libre2-dev googletest libgtest-dev libgmock-dev libbenchmark-dev
  # The git copy-back checks objects against their names: zlib inflates, libcrypto hashes.
  zlib1g-dev libssl-dev
  python3 procps util-linux
  # The Python client's test installs clients/python into a venv with pip, offline
  # (tests/clients: python3-pip brings setuptools and wheel).
  python3-venv python3-pip
  # Full-screen programs the output tests drive through the screen view.
  vim-tiny less
  # Interactive programs the readiness tests drive (tests/readiness/programs_test.cc): an
  # input loop with a short poll (ipython3), a reader outside the foreground group (tmux's
  # server), a pinentry started by gpg-agent (gnupg, pinentry-curses); top is in procps.
  ipython3
  tmux
  gnupg
  pinentry-curses

  # The recording tests replay a session's asciicast file with `asciinema cat` (tests/audit/).
  asciinema
)
# The test suite also runs the official MCP TypeScript SDK client (Node.js >= 18; Debian 12
# has 18) and compiles the TypeScript client with Debian's tsc (node-typescript: no registry);
# scripts/test.sh asks for it, the demo does not need it.
if [[ "${PTYBOX_WITH_NODE:-0}" == "1" ]]; then
  packages+=(nodejs npm node-typescript)
fi
# CI also fuzzes (scripts/fuzz.sh: clang-16 and its libFuzzer runtime), builds with ccache and
# checks the layout of every C++ file (scripts/check-format.sh: clang-format).
if [[ "${PTYBOX_WITH_FUZZ:-0}" == "1" ]]; then
  packages+=(clang-16 libclang-rt-16-dev ccache clang-format)
fi

# The side-by-side benchmarks (scripts/bench.sh) measure these baselines and profile the daemon.
if [[ "${PTYBOX_WITH_BENCH:-0}" == "1" ]]; then
  packages+=(python3-pexpect tmux valgrind strace)
fi

# Opt-in, never in CI's install: Debian's Docker engine (20.10), for
# `PTYBOX_IMAGE_ENGINE=docker images/test-image.sh` and docs/container.md's Docker commands.
# CI builds and tests the image under Podman, which images/test-image.sh installs itself.
if [[ "${PTYBOX_WITH_DOCKER:-0}" == "1" ]]; then
  packages+=(docker.io)
fi

missing=()
for p in "${packages[@]}"; do
  # A package counts as present when dpkg has it installed, or (for node/npm) the command exists.
  case "$p" in
    nodejs) command -v node >/dev/null 2>&1 && continue ;;
    npm) command -v npm >/dev/null 2>&1 && continue ;;
  esac
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: every package is present"
  exit 0
fi

if [[ $(id -u) -ne 0 ]]; then
  echo "install-deps: missing packages: ${missing[*]}" >&2
  echo "install-deps: run this script as root (or: sudo apt-get install ${missing[*]})" >&2
  exit 1
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
