"""CTest driver of the TypeScript client: compiles a copy of clients/typescript with `tsc -p`
(Debian's node-typescript: no registry), installs it with `npm install <dir>` into a scratch
project as a user would, and runs typescript_client_checks.mjs there against the real binary.
Exits 77 (skipped) with the reason when node, tsc or npm is missing.
    run_typescript_client_test.py SOURCE_DIR PTYBOX BUILD_DIR"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import contract  # noqa: E402

source, ptybox, build = Path(sys.argv[1]), str(Path(sys.argv[2]).absolute()), Path(sys.argv[3]).absolute()
for tool, package in (("node", "nodejs"), ("tsc", "node-typescript"), ("npm", "npm")):
    if shutil.which(tool) is None:
        print(f"SKIP: {tool} is not installed (apt-get install {package}; "
              "PTYBOX_WITH_NODE=1 scripts/install-deps.sh installs it)")
        sys.exit(77)

scratch = build / "typescript-client"
shutil.rmtree(scratch, ignore_errors=True)
scratch.mkdir(parents=True)

# Compile a copy: the test leaves no dist/ in the source tree and two builds never share one.
package = scratch / "package"
shutil.copytree(source / "clients" / "typescript", package,
                ignore=shutil.ignore_patterns("dist", "node_modules"))
compiled = subprocess.run(["tsc", "-p", str(package)], capture_output=True, text=True)
if compiled.returncode != 0:
    sys.exit(f"FAILED: tsc -p clients/typescript:\n{compiled.stdout}{compiled.stderr}")
print(subprocess.run(["tsc", "--version"], capture_output=True, text=True).stdout.strip()
      + ": tsc -p clients/typescript compiled")

project = scratch / "project"
project.mkdir()
(project / "package.json").write_text('{"name": "ptybox-client-test", "private": true, "type": "module"}\n')
installed = subprocess.run(["npm", "install", "--offline", "--no-audit", "--no-fund",
                            "--loglevel=error", str(package)],
                           cwd=project, capture_output=True, text=True)
if installed.returncode != 0:
    sys.exit(f"FAILED: npm install ./clients/typescript:\n{installed.stdout}{installed.stderr}")
print("npm install ./clients/typescript: installed")

checks = shutil.copy(Path(__file__).parent / "typescript_client_checks.mjs", project)
env = dict(os.environ,
           PTYBOX_BINARY=ptybox,
           PTYBOX_CONTRACT=json.dumps(contract.contract(source, ptybox)),
           PTYBOX_SCRATCH=str(scratch))
sys.exit(subprocess.run(["node", checks], cwd=project, env=env).returncode)
