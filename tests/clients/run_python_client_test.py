"""CTest driver of the Python client: installs clients/python as a user would, offline, into a
fresh venv (`python3 -m venv --system-site-packages`, then `pip install --no-index
--no-build-isolation`), and runs python_client_checks.py with the venv's Python against the real
binary. Exits 77 (skipped) with the reason when this host cannot make a venv.
    run_python_client_test.py SOURCE_DIR PTYBOX BUILD_DIR"""

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
scratch = build / "python-client"
shutil.rmtree(scratch, ignore_errors=True)
scratch.mkdir(parents=True)

# The interpreter Debian's python3-pip, python3-setuptools and python3-wheel belong to, as on
# a user's Debian 12 (another python3 may come first on PATH, without wheel).
base = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
have = subprocess.run([base, "-c", "import ensurepip, setuptools, wheel"], capture_output=True, text=True)
if have.returncode != 0:
    print(f"SKIP: {base} lacks venv, setuptools or wheel ({have.stderr.strip().splitlines()[-1]}); "
          "install python3-venv python3-pip (scripts/install-deps.sh does)")
    sys.exit(77)
venv = scratch / "venv"
made = subprocess.run([base, "-m", "venv", "--system-site-packages", str(venv)],
                      capture_output=True, text=True)
if made.returncode != 0:
    print(f"SKIP: `{base} -m venv` failed (install python3-venv: scripts/install-deps.sh "
          f"does): {made.stderr.strip()[-500:]}")
    sys.exit(77)
python = str(venv / "bin" / "python")

# pip builds in the source directory it is given: a copy keeps the tree clean and lets two
# builds run at once.
package = scratch / "package"
shutil.copytree(source / "clients" / "python", package,
                ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
# --no-build-isolation: pip would otherwise fetch setuptools from an index for the build;
# --no-index: nothing is fetched at all (CI reaches no Python index).
installed = subprocess.run([python, "-m", "pip", "install", "--no-index", "--no-build-isolation",
                            "--no-cache-dir", "--disable-pip-version-check", "--quiet",
                            str(package)], capture_output=True, text=True)
if installed.returncode != 0:
    sys.exit(f"FAILED: pip install ./clients/python into a venv:\n{installed.stdout}{installed.stderr}")
print("pip install --no-index --no-build-isolation ./clients/python: installed")

env = dict(os.environ,
           PTYBOX_BINARY=ptybox,
           PTYBOX_CONTRACT=json.dumps(contract.contract(source, ptybox)),
           PTYBOX_SCRATCH=str(scratch))
env.pop("PYTHONPATH", None)
# Run from the scratch directory, so `import ptybox` can only find the installed package.
checks = shutil.copy(Path(__file__).parent / "python_client_checks.py", scratch)
sys.exit(subprocess.run([python, checks], cwd=scratch, env=env).returncode)
