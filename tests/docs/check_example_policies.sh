#!/usr/bin/env bash
# The example policies as a newcomer uses them (examples/*.yaml): each passes `ptybox policy
# check`; the repository example, saved as .ptybox.yaml in a fresh project, passes layered on the
# operator example; and `ptybox run` under the operator example (as its comment promises:
# "installed, it works at once") runs a command in a fresh directory.
#   check_example_policies.sh SOURCE_DIR PTYBOX
set -euo pipefail
source_dir=$1
ptybox=$2
examples=$source_dir/examples
project=$(mktemp -d)
trap 'rm -rf "$project"' EXIT
cd "$project"
shopt -s nullglob
files=("$examples"/*.yaml)
[[ ${#files[@]} -ge 2 ]] || { echo "FAILED: no example policies in $examples"; exit 1; }
for file in "${files[@]}"; do
  "$ptybox" policy check "$file" || { echo "FAILED: ptybox policy check $file"; exit 1; }
done
cp "$examples/repo-policy.yaml" .ptybox.yaml
PTYBOX_OPERATOR_POLICY=$examples/operator-policy.yaml "$ptybox" policy check ||
  { echo "FAILED: the repository example layered on the operator example"; exit 1; }
out=$("$ptybox" run --policy "$examples/operator-policy.yaml" -- sh -c 'echo "ran CI=$CI"') ||
  { echo "FAILED: ptybox run under the operator example exited $?"; exit 1; }
[[ $out == "ran CI=true" ]] || { echo "FAILED: ptybox run printed '$out'"; exit 1; }
echo "every example policy checks, and ptybox run works under the operator example"
