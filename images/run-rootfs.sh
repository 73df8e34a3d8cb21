#!/usr/bin/env bash
# Runs a command in a rootfs made by `images/build-rootfs.sh --debian` the way a container
# runtime would, without one: new mount and pid namespaces, pivot_root into the rootfs (not
# chroot: the kernel refuses user namespaces to a chrooted process, so bwrap could not work),
# fresh /proc and /tmp, the host's /dev, WORKSPACE mounted at /workspace, the image's
# environment and user (10001, no capabilities). As root:
#
#   images/run-rootfs.sh ROOTFS WORKSPACE /usr/local/bin/ptybox doctor
#   images/run-rootfs.sh ROOTFS WORKSPACE /usr/local/bin/ptybox run -- make test
#   images/run-rootfs.sh ROOTFS WORKSPACE /usr/local/bin/ptybox serve --socket /run/ptybox/ptybox.sock
#
# The command is PID 1 of the new pid namespace, as the image's entrypoint is.
set -euo pipefail

if (($# < 3)); then
  sed -n '2,13p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
if [[ $(id -u) -ne 0 ]]; then
  echo "run-rootfs: run as root (it mounts and pivots into the rootfs)" >&2
  exit 2
fi
rootfs=$(cd "$1" && pwd)
workspace=$(cd "$2" && pwd)
shift 2

if [[ "${PTYBOX_RUN_ROOTFS_INSIDE:-}" != 1 ]]; then
  exec env PTYBOX_RUN_ROOTFS_INSIDE=1 unshare --mount --pid --fork -- "${BASH_SOURCE[0]}" \
    "$rootfs" "$workspace" "$@"
fi

mount --make-rprivate /
mount --bind "$rootfs" "$rootfs"
mount --rbind /dev "$rootfs/dev"
mount -t proc proc "$rootfs/proc"
mount -t tmpfs tmpfs "$rootfs/tmp"
mount --bind "$workspace" "$rootfs/workspace"
mkdir -p "$rootfs/.oldroot"
cd "$rootfs"
pivot_root . .oldroot
umount -l /.oldroot
rmdir /.oldroot 2>/dev/null || true
cd /workspace
exec /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  HOME=/home/ptybox LANG=C.UTF-8 \
  /usr/bin/setpriv --reuid 10001 --regid 10001 --clear-groups --inh-caps=-all \
  --bounding-set=-all "$@"
