#!/usr/bin/env bash
# Builds the contents of the ptybox container image without Docker: the same installed tree,
# operator policy, user, directories and image configuration as images/Dockerfile.
#
#   images/build-rootfs.sh --out DIR [--build-dir BUILD] [--debian]
#
#   --out DIR        where to write (must not exist, or be empty):
#                      DIR/rootfs/       the files the image adds to Debian 12
#                      DIR/packages.txt  the Debian packages to install under them
#                      DIR/config.json   ENTRYPOINT, CMD, USER, WORKDIR, ... (OCI config names)
#   --build-dir B    install from this configured CMake build (it is brought up to date);
#                    default: a fresh Release build in a temporary directory, as the Dockerfile
#   --debian         make DIR/rootfs a complete Debian 12 root first (mmdebstrap or debootstrap,
#                    as root, from the Debian archive), with the packages installed and the user
#                    created, so that `tar -C DIR/rootfs -c . | docker import ...` gives the image
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source_dir=$(cd "$here/.." && pwd)
out=""
build_dir=""
debian=0

usage() {
  sed -n '2,16p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

while (($#)); do
  case "$1" in
    --out) out=${2:?--out needs a directory}; shift 2 ;;
    --build-dir) build_dir=${2:?--build-dir needs a directory}; shift 2 ;;
    --debian) debian=1; shift ;;
    -h | --help) usage ;;
    *) echo "build-rootfs: unknown argument '$1'" >&2; usage ;;
  esac
done
[[ -n "$out" ]] || { echo "build-rootfs: --out DIR is required" >&2; usage; }
if [[ -e "$out" && -n "$(ls -A "$out")" ]]; then
  echo "build-rootfs: $out exists and is not empty; give a new directory" >&2
  exit 1
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)
rootfs="$out/rootfs"
mkdir -p "$rootfs"

# The same values as images/Dockerfile (tests/run/image_test.cc compares them).
readonly uid=10001
readonly gid=10001
readonly prefix=/usr  # where the Debian package installs (the Dockerfile installs the package)
readonly entrypoint="$prefix/bin/ptybox"

packages=$(sed -e 's/#.*//' "$here/runtime-packages.txt" | tr -s ' \t\n' ' ' | sed 's/^ //; s/ $//')

# 1. A complete Debian root, when asked for.
if ((debian)); then
  if [[ $(id -u) -ne 0 ]]; then
    echo "build-rootfs: --debian needs root (it installs packages into $rootfs)" >&2
    exit 1
  fi
  if command -v mmdebstrap >/dev/null; then
    mmdebstrap --variant=minbase --include="${packages// /,}" bookworm "$rootfs"
  elif command -v debootstrap >/dev/null; then
    debootstrap --variant=minbase --include="${packages// /,}" bookworm "$rootfs"
  else
    echo "build-rootfs: --debian needs mmdebstrap or debootstrap (apt-get install mmdebstrap)" >&2
    exit 1
  fi
  rm -rf "$rootfs/var/lib/apt/lists/"* "$rootfs/var/cache/apt/"*.bin
fi

# 2. Build and install ptybox into the layout of the Dockerfile's package (prefix /usr).
if [[ -z "$build_dir" ]]; then
  build_dir=$(mktemp -d /tmp/ptybox-rootfs-build-XXXXXX)
  trap 'rm -rf "$build_dir"' EXIT
  cmake -S "$source_dir" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DPTYBOX_BUILD_TESTS=OFF -DPTYBOX_BUILD_BENCH=OFF >/dev/null
fi
cmake --build "$build_dir" --target ptybox ptybox-init -j"${PTYBOX_JOBS:-2}" >/dev/null
DESTDIR="$rootfs" cmake --install "$build_dir" --prefix "$prefix" --strip >/dev/null

# 3. The operator policy, the package list, the user's directories.
install -D -m 0644 "$here/policy.yaml" "$rootfs/etc/ptybox/policy.yaml"
install -D -m 0644 "$here/runtime-packages.txt" "$rootfs$prefix/share/ptybox/runtime-packages.txt"
# Mode 1777 as /tmp: the daemon, whatever --user it runs as, can create its socket here (the
# socket itself is 0600).
install -d -m 1777 "$rootfs/run/ptybox"
install -d -m 0755 "$rootfs/workspace" "$rootfs/home/ptybox"
if [[ $(id -u) -eq 0 ]]; then
  chown "$uid:$gid" "$rootfs/workspace" "$rootfs/home/ptybox"
fi
if ((debian)); then
  chroot "$rootfs" groupadd --gid "$gid" ptybox
  chroot "$rootfs" useradd --uid "$uid" --gid "$gid" --home-dir /home/ptybox \
    --shell /bin/bash ptybox
fi

# 4. What Docker keeps outside the filesystem.
printf '%s\n' $packages >"$out/packages.txt"
cat >"$out/config.json" <<EOF
{
  "User": "$uid:$gid",
  "WorkingDir": "/workspace",
  "Env": ["LANG=C.UTF-8"],
  "StopSignal": "SIGTERM",
  "Healthcheck": {"Test": ["CMD", "$entrypoint", "doctor"]},
  "Entrypoint": ["$entrypoint"],
  "Cmd": ["serve", "--socket", "/run/ptybox/ptybox.sock"]
}
EOF

echo "build-rootfs: wrote $rootfs"
echo "build-rootfs: Debian packages to install under it: $packages"
if ((debian)); then
  echo "build-rootfs: import with: tar -C '$rootfs' -c . | docker import" \
    "--change 'USER $uid:$gid' --change 'WORKDIR /workspace' --change 'ENV LANG=C.UTF-8'" \
    "--change 'ENTRYPOINT [\"$entrypoint\"]'" \
    "--change 'CMD [\"serve\",\"--socket\",\"/run/ptybox/ptybox.sock\"]' - ptybox"
fi
