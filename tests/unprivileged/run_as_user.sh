#!/bin/sh
# Runs a test binary with the test process, its temporary workspaces and the daemon it starts
# all unprivileged: as the ordinary user USER (created once, idempotently, when run as root).
#   run_as_user.sh setup USER BUILD_DIR       create the user, check it reaches the build tree
#   run_as_user.sh run USER BINARY [ARGS...]  run BINARY as USER
# Not root: the whole suite already runs unprivileged; `run` then says so and runs BINARY as is.
set -eu
action=$1
user=$2
shift 2

if [ "$(id -u)" != 0 ]; then
  if [ "$action" = run ]; then
    echo "not root: running $1 as $(id -un), as the ordinary run already does"
    exec "$@"
  fi
  echo "not root: nothing to set up (the suite already runs as $(id -un))"
  exit 0
fi

case "$action" in
setup)
  build=$1
  if ! id -u "$user" >/dev/null 2>&1; then
    useradd --create-home --shell /bin/sh --comment "ptybox unprivileged test runs" "$user"
  fi
  # Every directory above the build tree must let the user through (a clone under /root does
  # not): grant search permission to this user only, with an ACL when possible. (A root
  # daemon's sessions need the same for ptybox-init: docs/sandbox.md, "The launch sequence".)
  dir=$(cd "$build" && pwd -P)
  while [ "$dir" != / ]; do
    if ! runuser -u "$user" -- test -x "$dir"; then
      if command -v setfacl >/dev/null 2>&1; then
        setfacl -m "u:$user:x" "$dir"
      else
        chmod o+x "$dir"
      fi
      echo "granted $user search permission on $dir"
    fi
    dir=$(dirname "$dir")
  done
  # The escape suite writes its control files next to its binary.
  escape="$build/tests/escape"
  if [ -d "$escape" ] && ! runuser -u "$user" -- test -w "$escape"; then
    mkdir -p "$escape/unprivileged-outside"
    chown "$user" "$escape/unprivileged-outside"
  fi
  runuser -u "$user" -- test -x "$build/bin/ptybox" || {
    echo "$user cannot execute $build/bin/ptybox" >&2
    exit 1
  }
  echo "user $user (uid $(id -u "$user")) is ready and reaches $build"
  ;;
run)
  home=$(getent passwd "$user" | cut -d: -f6)
  echo "running $1 as $user (uid $(id -u "$user")): test process, workspaces and daemon"
  # The sanitizer options of scripts/test-sanitized.sh pass (its reports must reach its log
  # directory from these runs too); nothing else of the caller's environment does.
  cd "$home"
  exec setpriv --reuid="$user" --regid="$(id -g "$user")" --init-groups --reset-env -- \
    env HOME="$home" USER="$user" LOGNAME="$user" PATH=/usr/local/bin:/usr/bin:/bin \
    PTYBOX_ESCAPE_OUTSIDE_DIR="${PTYBOX_ESCAPE_OUTSIDE_DIR:-}" \
    ASAN_OPTIONS="${ASAN_OPTIONS:-}" UBSAN_OPTIONS="${UBSAN_OPTIONS:-}" \
    LSAN_OPTIONS="${LSAN_OPTIONS:-}" "$@"
  ;;
*)
  echo "usage: $0 setup|run USER ..." >&2
  exit 2
  ;;
esac
