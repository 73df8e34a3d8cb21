#!/usr/bin/env python3
"""images/Dockerfile's from-source build installs every build dependency CMake requires.

CI builds the image from a prebuilt package (PTYBOX_DEB_FROM=context), so the Dockerfile's own
compile, the one an operator's plain `docker build` or `podman build` runs, is not exercised
there: a dependency added to cmake/Dependencies.cmake but not to the Dockerfile broke it
unnoticed (libre2-dev). Every Debian package named by `ptybox_missing(... "PACKAGE")` outside
the tests' and benchmarks' blocks must be in the Dockerfile's build-package list.

    check_dockerfile_build_deps.py SOURCE_DIR
"""
import pathlib, re, sys

source = pathlib.Path(sys.argv[1])
cmake = (source / "cmake/Dependencies.cmake").read_text()
# Only what a build with PTYBOX_BUILD_TESTS=OFF and PTYBOX_BUILD_BENCH=OFF needs.
cmake = re.sub(r"if\(PTYBOX_BUILD_(TESTS|BENCH)\).*?endif\(\)\s*endif\(\)", "", cmake, flags=re.S)
needed = set(re.findall(r'ptybox_missing\("[^"]*"\s+"([^"]+)"\)', cmake))
dockerfile = (source / "images/Dockerfile").read_text()
words = set(re.findall(r"[a-z0-9][a-z0-9+.-]*", dockerfile))
missing = sorted(needed - words)
if not needed:
    sys.exit("FAILED: no ptybox_missing(...) package found in cmake/Dependencies.cmake")
if missing:
    print("FAILED: images/Dockerfile does not install", ", ".join(missing),
          "which cmake/Dependencies.cmake requires")
    sys.exit(1)
print(f"images/Dockerfile installs all {len(needed)} build packages: {', '.join(sorted(needed))}")
