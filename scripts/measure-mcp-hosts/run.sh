#!/usr/bin/env bash
# Drives the real Claude Code and Codex CLIs against a local stand-in for their model APIs, with
# ptybox as their MCP server, and reports what each host handed its model. See README.md.
#
#   run.sh [--ptybox BIN] [--hosts PREFIX] [--out DIR] [--max-result-bytes N] [claude] [codex]
#
# --max-result-bytes is passed to `ptybox mcp` (its largest, 67108864, shows what a host does with
# an unbounded result).
# PREFIX is where `npm install --prefix PREFIX @anthropic-ai/claude-code @openai/codex` put the
# hosts (default /work/hosts). Nothing here downloads anything. When this user may create a
# network namespace (root), the whole run happens in one whose only interface is loopback, so
# nothing the hosts try can leave the machine; otherwise the hosts' telemetry and update checks
# are switched off by their environment variables only.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
ptybox="$repo/build/bin/ptybox"
hosts=/work/hosts
out=""
budget=()
which=()
while (($#)); do
  case "$1" in
    --ptybox) ptybox="$2"; shift 2 ;;
    --hosts) hosts="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --max-result-bytes) budget=(--max-result-bytes "$2"); shift 2 ;;
    claude|codex) which+=("$1"); shift ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
((${#which[@]})) || which=(claude codex)
[[ -x "$ptybox" ]] || { echo "run.sh: no ptybox binary at '$ptybox' (give --ptybox BIN)" >&2; exit 2; }
ptybox="$(realpath "$ptybox")"
out="${out:-$(mktemp -d /tmp/ptybox-hosts-XXXXXX)}"
mkdir -p "$out"
out="$(realpath "$out")"

# Re-enter in a network namespace with only loopback up, when allowed.
if [[ -z "${PTYBOX_HOSTS_NETNS:-}" ]] && unshare --net true 2>/dev/null; then
  export PTYBOX_HOSTS_NETNS=1
  exec unshare --net -- bash -c 'ip link set lo up 2>/dev/null || true; exec "$@"' bash \
    "$0" --ptybox "$ptybox" --hosts "$hosts" --out "$out" "${budget[@]}" "${which[@]}"
fi
if [[ -n "${PTYBOX_HOSTS_NETNS:-}" ]]; then
  echo "network: a private namespace with loopback only" | tee "$out/network.txt"
else
  echo "network: the machine's (telemetry and updates switched off by environment only)" | tee "$out/network.txt"
fi

run_one() {
  local host="$1" dir="$out/$1"
  rm -rf "$dir"
  mkdir -p "$dir/home" "$dir/workspace" "$dir/log"
  python3 "$here/standin.py" "$dir/log" 2>"$dir/standin.stderr" &
  local standin=$!
  for _ in $(seq 100); do [[ -s "$dir/log/port" ]] && break; sleep 0.1; done
  local port
  port="$(cat "$dir/log/port")"
  local server=(python3 "$here/mcp_tap.py" "$dir/mcp.jsonl" -- "$ptybox" mcp
    --workspace "$dir/workspace" --mode workspace-write "${budget[@]}")
  local prompt="Run seq 1 200000 in a ptybox terminal and tell me its last line."
  local rc=0
  case "$host" in
    claude)
      local bin="$hosts/node_modules/.bin/claude"
      "$bin" --version >"$dir/version.txt"
      python3 - "$dir/mcp-config.json" "${server[@]}" <<'EOF'
import json, sys
json.dump({"mcpServers": {"ptybox": {"command": sys.argv[2], "args": sys.argv[3:]}}}, open(sys.argv[1], "w"), indent=2)
EOF
      (cd "$dir/workspace" && env -i PATH="$PATH" HOME="$dir/home" TERM=dumb \
        ANTHROPIC_BASE_URL="http://127.0.0.1:$port" ANTHROPIC_API_KEY=standin-key \
        DISABLE_TELEMETRY=1 DISABLE_ERROR_REPORTING=1 DISABLE_AUTOUPDATER=1 \
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY=1 \
        timeout 300 "$bin" -p --output-format json --allowedTools mcp__ptybox \
        --mcp-config "$dir/mcp-config.json" --strict-mcp-config "$prompt" \
        >"$dir/host.stdout" 2>"$dir/host.stderr") || rc=$?
      ;;
    codex)
      local bin="$hosts/node_modules/.bin/codex"
      "$bin" --version >"$dir/version.txt"
      mkdir -p "$dir/home/.codex"
      python3 - "$dir/home/.codex/config.toml" "$port" "$dir/workspace" "${server[@]}" <<'EOF'
import json, sys
path, port, ws, cmd = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
q = json.dumps  # a TOML basic string is a JSON string for these values
open(path, "w").write(f"""model = "standin-model"
model_provider = "standin"
check_for_update_on_startup = false

[model_providers.standin]
name = "standin"
base_url = {q("http://127.0.0.1:" + port + "/v1")}
wire_api = "responses"
env_key = "STANDIN_API_KEY"
request_max_retries = 0
stream_max_retries = 0

[analytics]
enabled = false

[feedback]
enabled = false

[otel]
exporter = "none"
log_user_prompt = false

[projects.{q(ws)}]
trust_level = "trusted"

[mcp_servers.ptybox]
command = {q(cmd[0])}
args = {json.dumps(cmd[1:])}
default_tools_approval_mode = "approve"
startup_timeout_sec = 60
tool_timeout_sec = 300
""")
EOF
      (cd "$dir/workspace" && env -i PATH="$PATH" HOME="$dir/home" TERM=dumb \
        CODEX_HOME="$dir/home/.codex" STANDIN_API_KEY=standin-key \
        timeout 300 "$bin" exec --skip-git-repo-check --json "$prompt" \
        </dev/null >"$dir/host.stdout" 2>"$dir/host.stderr") || rc=$?
      ;;
  esac
  echo "$rc" >"$dir/host.rc"
  kill "$standin" 2>/dev/null || true
  wait "$standin" 2>/dev/null || true
  echo "== $host ($(cat "$dir/version.txt")), exit $rc"
  python3 "$here/report.py" "$dir" | tee "$dir/report.txt"
}

for h in "${which[@]}"; do run_one "$h"; done
echo "logs: $out"
