#!/usr/bin/env bash
# Builds the Debian package from the Release build and smoke-tests it on this machine, as root:
#   scripts/test-deb.sh [BUILD_DIR]        (default build-release, configured by scripts/test.sh)
# cpack -G DEB, `apt-get install ./ptybox_<version>_amd64.deb`, then the installed /usr/bin/ptybox:
# `ptybox doctor` finds /usr/libexec/ptybox/ptybox-init by itself, a confined `ptybox run` writes
# its workspace and not /etc, the conffile and the man page are in place. The package is purged
# afterwards (also on failure), so the machine is left as it was. Leaves the .deb in BUILD_DIR
# for images/test-image.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-release}
fail() { echo "test-deb: FAIL: $*" >&2; exit 1; }

[[ $(id -u) -eq 0 ]] || fail "run as root (it installs and removes a package)"
if dpkg-query -W -f='${Status}' ptybox 2>/dev/null | grep -q "install ok installed"; then
  fail "a ptybox package is already installed; remove it first (apt-get purge ptybox)"
fi
# An operator's own /etc/ptybox/policy.yaml would be taken over by the conffile and purged
# with it: keep a copy and put it back at the end.
saved=""
if [[ -e /etc/ptybox/policy.yaml ]]; then
  saved=$(mktemp /tmp/ptybox-deb-policy-XXXXXX)
  cp -a /etc/ptybox/policy.yaml "$saved"
fi
restore() {
  timeout 120 apt-get purge -y -qq ptybox >/dev/null 2>&1 || true
  if [[ -n "$saved" ]]; then mkdir -p /etc/ptybox && mv -f "$saved" /etc/ptybox/policy.yaml; fi
  [[ -z "${ws:-}" ]] || rm -rf "$ws"
}
rm -f "$build"/ptybox_*.deb
(cd "$build" && timeout 300 cpack -G DEB >/dev/null)
deb=$(ls "$build"/ptybox_*_amd64.deb)
deb=$(cd "$(dirname "$deb")" && pwd)/$(basename "$deb")
echo "test-deb: built $(basename "$deb") ($(du -k "$deb" | cut -f1) KiB)"
dpkg-deb -f "$deb" Depends | grep -q bubblewrap || fail "Depends lacks bubblewrap"
dpkg-deb -f "$deb" Depends | grep -q libyaml-cpp || fail "Depends lacks the shared libraries"

trap restore EXIT
DEBIAN_FRONTEND=noninteractive timeout 300 apt-get install -y -qq --no-install-recommends \
  -o DPkg::Lock::Timeout=120 -o Dpkg::Options::=--force-confnew "$deb" >/dev/null
[[ $(command -v ptybox) == /usr/bin/ptybox ]] || fail "ptybox is not /usr/bin/ptybox on PATH"
[[ -x /usr/libexec/ptybox/ptybox-init ]] || fail "no /usr/libexec/ptybox/ptybox-init"
grep -qx /etc/ptybox/policy.yaml /var/lib/dpkg/info/ptybox.conffiles || fail "policy is no conffile"
[[ -s /usr/share/man/man1/ptybox.1.gz ]] || fail "no man page"
[[ -s /usr/share/doc/ptybox/README.md ]] || fail "no docs"

# doctor without PTYBOX_INIT: the installed layout must lead it to the helper.
out=$(cd / && env -u PTYBOX_INIT timeout 60 /usr/bin/ptybox doctor) || fail "doctor failed: $out"
grep -q "ptybox-init: /usr/libexec/ptybox/ptybox-init" <<<"$out" || fail "doctor: $out"
ptybox policy check /etc/ptybox/policy.yaml >/dev/null || fail "the shipped policy is invalid"

ws=$(mktemp -d /tmp/ptybox-deb-ws-XXXXXX)
out=$(cd "$ws" && env -u PTYBOX_INIT timeout 60 ptybox run -- sh -c \
  'touch made; touch /etc/ptybox-deb-probe 2>/dev/null && echo etc-written || echo etc-refused;
   grep -c "^Seccomp:[[:space:]]*2" /proc/self/status; exit 7') && rc=0 || rc=$?
[[ $rc -eq 7 ]] || fail "ptybox run exited $rc (expected the command's 7): $out"
[[ $out == $'etc-refused\n1' ]] || fail "ptybox run printed: $out"
[[ -e "$ws/made" && ! -e /etc/ptybox-deb-probe ]] || fail "workspace/etc writes wrong"
echo "test-deb: installed, doctor ok, confined run ok (exit 7 passed through, /etc refused)"

timeout 120 apt-get purge -y -qq ptybox >/dev/null
[[ ! -e /usr/bin/ptybox && ! -e /usr/libexec/ptybox ]] || fail "purge left files behind"
restore
trap - EXIT
echo "test-deb: purged; the machine is as before"
