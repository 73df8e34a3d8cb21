#!/usr/bin/env bash
# Builds images/Dockerfile under a real engine (Podman with runc) and smoke-tests the image, as
# root; .ci/run runs it (scripts/test.sh, step "image"). Every step has a timeout.
#
#   images/test-image.sh [--deb FILE | --from-source] [--keep]
#   PTYBOX_IMAGE_ENGINE=docker images/test-image.sh ...     (opt-in; CI runs Podman)
#
#   --deb FILE|DIR  install this prebuilt ptybox_<version>_amd64.deb (or the one in DIR) in the
#                   image (CI passes its Release build's: no second compile); default:
#                   build-release/ptybox_*.deb when present, else --from-source
#   --from-source   the Dockerfile's own build stage compiles ptybox (as `docker build` from a
#                   plain clone does)
#   --keep          keep the built image (tag localhost/ptybox-test:latest)
#
# What it does:
#  1. installs podman, runc, debootstrap and mmdebstrap from Debian's archive when missing;
#  2. uses a containers configuration of its own under $PTYBOX_IMAGE_STATE (default
#     /var/cache/ptybox-image-test), never /etc/containers: runc (crun refuses hybrid cgroup
#     hosts), cgroupfs, explicit ulimits (hosts where the defaults cannot be raised), its own
#     storage, no registries;
#  3. makes the Dockerfile's base image (FROM debian:12-slim): a minbase bookworm from Debian's
#     archive (mmdebstrap, or debootstrap without it), `podman import`ed under that name, once
#     per machine (kept while the tag exists in the private storage);
#  4. builds images/Dockerfile (--format docker: the HEALTHCHECK is kept);
#  5. smoke-tests: doctor and `run` without the flags (a refusal, never an unconfined command),
#     doctor with them, a confined `ptybox run`, a `serve --stdio` JSON-RPC session, `ptybox
#     mcp` over `podman run -i`, --user of a host user writing a bind-mounted workspace (and
#     doctor naming the unwritable workspace for the image's default user), the daemon's socket
#     directory, stop with an open session (exit 0 within the grace), orphan reaping by PID 1.
#
# Environment:
#   PTYBOX_IMAGE_STATE   the cache and private configuration directory (default
#                        /var/cache/ptybox-image-test); an empty one times a cold machine
#   PTYBOX_IMAGE_ENGINE  podman (default) or docker: the same build and smoke tests under a
#                        Docker engine that is already running (`docker info` answers; this
#                        script never starts dockerd nor touches /etc/docker). Steps 1-2 then
#                        only check for the docker client; the base image is `docker import`ed;
#                        the flags are Docker's (seccomp, apparmor, systempaths unconfined).
#   PTYBOX_DOCKER        the docker client (default: docker on PATH). Debian 12's docker.io
#                        (20.10) builds with BuildKit when told (DOCKER_BUILDKIT=1, set here):
#                        BuildKit skips the unused compile stage; a client of 23 or later
#                        without the buildx plugin has only the classic builder, which runs it.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source_dir=$(cd "$here/.." && pwd)
state=${PTYBOX_IMAGE_STATE:-/var/cache/ptybox-image-test}
engine=${PTYBOX_IMAGE_ENGINE:-podman}
docker_client=${PTYBOX_DOCKER:-docker}
tag=localhost/ptybox-test:latest
deb=""
from_source=0
keep=0
while (($#)); do
  case "$1" in
    --deb) deb=${2:?--deb needs a file}; shift 2 ;;
    --from-source) from_source=1; shift ;;
    --keep) keep=1; shift ;;
    -h | --help) sed -n '2,42p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "test-image: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

started=$SECONDS
log() { echo "test-image: [$((SECONDS - started)) s] $*"; }
fail() { echo "test-image: FAIL: $*" >&2; exit 1; }
[[ $(id -u) -eq 0 ]] || fail "run as root (it installs packages and runs a root podman)"
case "$engine" in
  podman | docker) ;;
  *) fail "PTYBOX_IMAGE_ENGINE=$engine: not podman or docker" ;;
esac

# ---- 1. the engine ------------------------------------------------------------------------
missing=()
if [[ $engine == podman ]]; then
  command -v podman >/dev/null || missing+=(podman)
  command -v runc >/dev/null || missing+=(runc)
else
  command -v "$docker_client" >/dev/null ||
    fail "no docker client '$docker_client' (apt-get install docker.io; PTYBOX_DOCKER names another)"
  timeout 60 "$docker_client" info >/dev/null 2>&1 ||
    fail "'$docker_client info' does not answer: start the Docker engine first (docs/container.md, \"A Docker engine on Debian 12\")"
fi
command -v debootstrap >/dev/null || missing+=(debootstrap)
command -v mmdebstrap >/dev/null || missing+=(mmdebstrap)
if ((${#missing[@]})); then
  log "installing ${missing[*]} from Debian's archive"
  export DEBIAN_FRONTEND=noninteractive
  timeout 300 apt-get update -qq
  timeout 600 apt-get install -y -qq --no-install-recommends -o DPkg::Lock::Timeout=120 \
    "${missing[@]}" >/dev/null
fi

# ---- 2. a private containers configuration (Podman) ------------------------------------------
mkdir -p "$state/tmp"
if [[ $engine == podman ]]; then
mkdir -p "$state/conf" "$state/storage" "$state/run" "$state/tmp"
cat >"$state/conf/containers.conf" <<CONF
# Written by images/test-image.sh; only its podman reads it (CONTAINERS_CONF).
[containers]
# Explicit: podman's default raises nofile/nproc to the host maximum, which some hosts refuse.
default_ulimits = ["nofile=4096:4096", "nproc=4096:4096"]
log_driver = "k8s-file"
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
events_logfile_path = "$state/run/events.log"
tmp_dir = "$state/tmp"
[network]
network_config_dir = "$state/conf/networks"
CONF
cat >"$state/conf/storage.conf" <<CONF
[storage]
driver = "overlay"
runroot = "$state/run"
graphroot = "$state/storage"
CONF
cat >"$state/conf/registries.conf" <<'CONF'
# No registry: the base image is made locally (debootstrap) and every FROM resolves locally.
unqualified-search-registries = []
short-name-mode = "disabled"
CONF
cat >"$state/conf/policy.json" <<'CONF'
{"default": [{"type": "insecureAcceptAnything"}]}
CONF
mkdir -p "$state/conf/networks"
export CONTAINERS_CONF="$state/conf/containers.conf"
export CONTAINERS_STORAGE_CONF="$state/conf/storage.conf"
export CONTAINERS_REGISTRIES_CONF="$state/conf/registries.conf"
fi
# The engine's CLI (an array, so that `timeout` can run it).
if [[ $engine == docker ]]; then eng=("$docker_client"); else eng=(podman); fi
# Removing a container at once (Podman's rm waits 10 s for a running one without -t 0).
rm_now=(rm -f)
[[ $engine == docker ]] || rm_now+=(-t 0)

# ---- 3. the base image ----------------------------------------------------------------------
base=$(sed -n 's/^ARG DEBIAN_IMAGE=//p' "$here/Dockerfile")
[[ -n "$base" ]] || fail "images/Dockerfile has no ARG DEBIAN_IMAGE="
if timeout 60 "${eng[@]}" image inspect "$base" >/dev/null 2>&1; then
  log "base image $base: cached"
else
  mirror=${PTYBOX_DEBIAN_MIRROR:-http://deb.debian.org/debian}
  security=${PTYBOX_DEBIAN_SECURITY:-http://deb.debian.org/debian-security}
  tarball="$state/tmp/base.tar"
  if command -v mmdebstrap >/dev/null; then
    # mmdebstrap: Debian's faster debootstrap (apt downloads in parallel), straight to a tar.
    log "base image $base: mmdebstrap of bookworm (minbase), once per machine"
    # The path filters of Debian's -slim images: no manuals, docs or translations (kept in
    # the image's /etc/dpkg/dpkg.cfg.d for what is installed later).
    timeout 1200 mmdebstrap --variant=minbase --dpkgopt=force-unsafe-io \
      --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
      --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
      --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-include=/usr/share/locale/locale.alias' \
      bookworm "$tarball" \
      "deb $mirror bookworm main" "deb $mirror bookworm-updates main" \
      "deb $security bookworm-security main" >"$state/tmp/debootstrap.log" 2>&1 ||
      { tail -20 "$state/tmp/debootstrap.log" >&2; fail "mmdebstrap failed (log: $state/tmp/debootstrap.log)"; }
  else
    log "base image $base: debootstrap of bookworm (minbase), once per machine"
    rootfs=$(mktemp -d "$state/tmp/rootfs-XXXXXX")
    timeout 1800 debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >"$state/tmp/debootstrap.log" 2>&1 ||
      { tail -20 "$state/tmp/debootstrap.log" >&2; fail "debootstrap failed (log: $state/tmp/debootstrap.log)"; }
    # As debian:12-slim: no package cache, no lists, the security suite.
    printf 'deb %s bookworm main\ndeb %s bookworm-updates main\ndeb %s bookworm-security main\n' \
      "$mirror" "$mirror" "$security" >"$rootfs/etc/apt/sources.list"
    rm -rf "$rootfs/var/cache/apt/archives/"*.deb "$rootfs/var/lib/apt/lists/"* "$rootfs/var/log/"*
    timeout 300 tar -C "$rootfs" -cf "$tarball" .
    rm -rf "$rootfs"
  fi
  timeout 300 "${eng[@]}" import --change 'CMD ["bash"]' "$tarball" "$base" >/dev/null
  rm -f "$tarball"
  log "base image $base: imported ($("${eng[@]}" image inspect --format '{{.Size}}' "$base") bytes)"
fi

# ---- 4. the image ---------------------------------------------------------------------------
build_args=()
if ((!from_source)); then
  if [[ -z "$deb" ]]; then
    deb=$(ls "$source_dir"/build-release/ptybox_*_amd64.deb 2>/dev/null | head -n1 || true)
  fi
  if [[ -n "$deb" && -d "$deb" ]]; then
    deb=$(ls "$deb"/ptybox_*_amd64.deb 2>/dev/null | head -n1 || true)
    [[ -n "$deb" ]] || fail "--deb: no ptybox_*_amd64.deb in that directory (cpack -G DEB there)"
  fi
  if [[ -n "$deb" ]]; then
    [[ -f "$deb" ]] || fail "--deb $deb: no such file"
    rm -f "$here/packages/"*.deb
    cp "$deb" "$here/packages/"
    build_args=(--build-arg PTYBOX_DEB_FROM=context)
    log "building images/Dockerfile with the prebuilt $(basename "$deb")"
  else
    from_source=1
  fi
fi
((from_source)) && log "building images/Dockerfile from source (its build stage compiles ptybox)"
build_start=$SECONDS
if [[ $engine == podman ]]; then
  # --signature-policy: no /etc/containers/policy.json is needed.
  build=(build --signature-policy "$state/conf/policy.json" --format docker --network host
    --pull=never)
else
  build=(build)
  # Clients before 23 (Debian's 20.10) use the engine's BuildKit when asked; later clients
  # use it by default through the buildx plugin, and fall back to the classic builder without.
  client_version=$("${eng[@]}" version --format '{{.Client.Version}}' 2>/dev/null || true)
  client_major=${client_version%%.*}
  [[ $client_major =~ ^[0-9]+$ ]] || client_major=0
  if ((client_major < 23)); then
    export DOCKER_BUILDKIT=1
  elif ! "${eng[@]}" buildx version >/dev/null 2>&1; then
    log "docker client $client_version without buildx: the classic builder (it also runs the compile stage)"
  fi
fi
timeout 1200 "${eng[@]}" "${build[@]}" -f "$here/Dockerfile" \
  -t "$tag" "${build_args[@]}" "$source_dir" >"$state/tmp/build.log" 2>&1 ||
  { tail -30 "$state/tmp/build.log" >&2; fail "$engine build failed (log: $state/tmp/build.log)"; }
rm -f "$here/packages/"*.deb
size=$("${eng[@]}" image inspect --format '{{.Size}}' "$tag")
log "built $tag in $((SECONDS - build_start)) s: $((size / 1000000)) MB"

cleanup() {
  local names
  names=$("${eng[@]}" ps -aq --filter label=ptybox-test=1 2>/dev/null || true)
  [[ -z "$names" ]] || "${eng[@]}" "${rm_now[@]}" $names >/dev/null 2>&1 || true
  [[ -z "${work:-}" ]] || rm -rf "$work"
  rm -f "$here/packages/"*.deb
  ((keep)) || "${eng[@]}" rmi -f "$tag" >/dev/null 2>&1 || true
  # The build's intermediate layers (the base image stays: it is tagged).
  "${eng[@]}" image prune -f >/dev/null 2>&1 || true
}
trap cleanup EXIT
work=$(mktemp -d /tmp/ptybox-image-test-XXXXXX)

# The flags of docs/container.md. Podman: its default seccomp profile allows user namespaces;
# the masked /proc paths must be unmasked for bwrap to mount a new /proc. Docker: its default
# seccomp profile refuses namespaces, so seccomp too (and AppArmor where the host has it).
if [[ $engine == podman ]]; then
  confined=(--security-opt unmask=/proc/*)
  fix_named=unmask
else
  confined=(--security-opt seccomp=unconfined --security-opt apparmor=unconfined
    --security-opt systempaths=unconfined)
  fix_named=seccomp=unconfined
fi
run=("${eng[@]}" run --rm --network none --no-healthcheck --label ptybox-test=1)

# ---- 5. smoke tests -------------------------------------------------------------------------
# 5a. The HEALTHCHECK survived the build.
health=$("${eng[@]}" image inspect --format '{{json .Config.Healthcheck}}' "$tag")
grep -q '"/usr/bin/ptybox","doctor"' <<<"${health//, /,}" || fail "no HEALTHCHECK in the image: $health"
log "HEALTHCHECK kept: $health"

# 5b. Without the flags: doctor fails, names the fix, and run refuses (exit 125, nothing ran).
out=$(timeout 120 "${run[@]}" "$tag" doctor 2>&1) && rc=0 || rc=$?
[[ $rc -eq 1 ]] || fail "doctor without the flags exited $rc (expected 1): $out"
grep -q '^\[FAIL\] sandbox-start' <<<"$out" || fail "doctor without the flags: $out"
grep -q -- "$fix_named" <<<"$out" || fail "doctor names no $engine fix ($fix_named): $out"
if grep -q 'sysctl -w' <<<"$out"; then fail "doctor suggests a host sysctl inside a container: $out"; fi
log "doctor without the flags: exit 1, $(grep -c '^\[FAIL\]' <<<"$out") failure(s), names $fix_named"
out=$(timeout 120 "${run[@]}" "$tag" run -- sh -c 'echo UNCONFINED-RAN' 2>&1) && rc=0 || rc=$?
[[ $rc -eq 125 ]] || fail "run without the flags exited $rc (expected 125): $out"
if grep -q UNCONFINED-RAN <<<"$out"; then fail "the command ran without a sandbox: $out"; fi
if grep -q '^bwrap:' <<<"$out"; then fail "run printed bwrap's raw line first: $out"; fi
log "run without the flags: exit 125, the command did not run"

# 5c. With the flags: every probe ok (the image's own /workspace, user 10001).
out=$(timeout 120 "${run[@]}" "${confined[@]}" "$tag" doctor 2>&1) ||
  fail "doctor with the flags: $out"
log "doctor with ${confined[*]}: every probe ok"

# 5d. A confined run as the invoking user writes the bind-mounted workspace (and only that).
# As root (CI), the invoking user is $SUDO_UID when set; a container's root itself lacks the
# CAP_SYS_ADMIN a root daemon's idmapped binds need, so ptybox refuses it: checked instead.
uid=${SUDO_UID:-$(id -u)}; gid=${SUDO_GID:-$(id -g)}
if [[ $uid == 0 ]]; then
  out=$(timeout 120 "${run[@]}" "${confined[@]}" --user 0:0 "$tag" run -- sh -c 'echo AS-ROOT-RAN' 2>&1) && rc=0 || rc=$?
  [[ $rc -ne 0 && $out != *AS-ROOT-RAN* ]] || fail "run as the container's root: exit $rc: $out"
  log "--user 0 (a container's root without CAP_SYS_ADMIN): refused with exit $rc, nothing ran"
else
  mkdir -p "$work/ws"
  chown "$uid:$gid" "$work/ws"
  out=$(timeout 120 "${run[@]}" "${confined[@]}" --user "$uid:$gid" -v "$work/ws:/workspace" "$tag" \
    run -- sh -c 'echo made >made; touch /etc/x 2>/dev/null && echo etc-written || echo etc-refused;
    grep -q "^NoNewPrivs:[[:space:]]*1" /proc/self/status && echo nnp; exit 3' 2>&1) && rc=0 || rc=$?
  [[ $rc -eq 3 && $out == *etc-refused*nnp* ]] || fail "confined run: exit $rc: $out"
  [[ $(stat -c %u "$work/ws/made") == "$uid" ]] || fail "the workspace file is not owned by $uid"
  log "confined run as --user $uid:$gid: exit 3 passed through, /etc refused, file owned by $uid"
fi
# An ordinary host user (uid 4242) the same way, and the image's default user refused by doctor.
mkdir -p "$work/ws4242" && chown 4242:4242 "$work/ws4242"
out=$(timeout 120 "${run[@]}" "${confined[@]}" --user 4242:4242 -v "$work/ws4242:/workspace" "$tag" \
  run -- sh -c 'echo made >made; touch /etc/x 2>/dev/null && echo etc-written || echo etc-refused;
  grep -q "^NoNewPrivs:[[:space:]]*1" /proc/self/status && echo nnp; exit 3' 2>&1) && rc=0 || rc=$?
[[ $rc -eq 3 && $out == *etc-refused*nnp* ]] || fail "confined run as 4242: exit $rc: $out"
[[ $(stat -c %u "$work/ws4242/made") == 4242 ]] || fail "not written as 4242"
out=$(timeout 120 "${run[@]}" "${confined[@]}" -v "$work/ws4242:/workspace" "$tag" doctor 2>&1) && rc=0 || rc=$?
[[ $rc -eq 1 && $out == *"[FAIL] workspace"*"--user"* ]] ||
  fail "doctor as 10001 with a workspace owned by 4242: exit $rc: $out"
log "confined run as --user 4242:4242: exit 3 passed through, /etc refused, NoNewPrivs, file owned by 4242; doctor as 10001 names the unwritable workspace"

# 5e. serve --stdio: a JSON-RPC session (open, send, close); 5f. ptybox mcp over `podman run -i`.
client=(timeout 120 python3 "$here/smoke_client.py")
out=$("${client[@]}" rpc -- "${run[@]}" -i "${confined[@]}" "$tag" serve --stdio) ||
  fail "serve --stdio session"
log "$out"
out=$("${client[@]}" mcp -- "${run[@]}" -i "${confined[@]}" "$tag" mcp) || fail "ptybox mcp"
log "$out"

# 5g. The daemon as the image's CMD: it makes its socket directory itself (an empty volume, or
# one a host user owns), serves, and stops with an open session: exit 0 within the grace.
name=ptybox-test-stop-$$
out=$("${client[@]}" stop 10 -- "${eng[@]}" run -i --name "$name" --network none --no-healthcheck --label ptybox-test=1 \
  "${confined[@]}" "$tag" serve --stdio) || fail "stop with an open session"
log "$out"
"${eng[@]}" rm -f "$name" >/dev/null 2>&1 || true
mkdir -p "$work/run" && chown 4242:4242 "$work/run"
name=ptybox-test-serve-$$
timeout 60 "${eng[@]}" run -d --name "$name" --network none --no-healthcheck --label ptybox-test=1 "${confined[@]}" \
  --user 4242:4242 -v "$work/ws4242:/workspace" -v "$work/run:/run/ptybox-host" "$tag" \
  serve --socket /run/ptybox-host/sub/ptybox.sock >/dev/null
for _ in $(seq 100); do [[ -S "$work/run/sub/ptybox.sock" ]] && break; sleep 0.1; done
[[ -S "$work/run/sub/ptybox.sock" ]] ||
  fail "no socket: $("${eng[@]}" logs "$name" 2>&1 | tail -5)"
[[ $(stat -c '%u %a' "$work/run/sub") == "4242 700" ]] || fail "socket directory: $(stat -c '%u %a' "$work/run/sub")"

# 5h. Orphan reaping: an orphan left by `exec` is reaped by ptybox (PID 1), never a zombie.
timeout 60 "${eng[@]}" exec "$name" sh -c 'sh -c "sleep 1 &" ; true'
sleep 2
zombies=$(timeout 60 "${eng[@]}" exec "$name" sh -c 'for s in /proc/[0-9]*/stat; do read -r l <"$s" 2>/dev/null && case "$l" in *") Z "*) echo "$l";; esac; done' || true)
[[ -z "$zombies" ]] || fail "zombies under PID 1: $zombies"
pid1=$(timeout 60 "${eng[@]}" exec "$name" cat /proc/1/comm)
[[ $pid1 == ptybox ]] || fail "PID 1 is $pid1"
stop_start=$SECONDS
timeout 60 "${eng[@]}" stop -t 10 "$name" >/dev/null
code=$("${eng[@]}" inspect --format '{{.State.ExitCode}}' "$name")
[[ $code == 0 ]] || fail "the socket daemon exited $code on stop"
log "socket daemon as --user 4242 made /run/ptybox-host/sub (0700), reaped the orphan, stopped with exit 0 in $((SECONDS - stop_start)) s"

log "every image check passed in $((SECONDS - started)) s (image $((size / 1000000)) MB)"
