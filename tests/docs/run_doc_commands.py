#!/usr/bin/env python3
"""Runs every command of the documentation's code blocks marked runnable, so the docs stay true.

A block is runnable when the line just before its opening fence is `<!-- runnable -->`:

    <!-- runnable -->
    ```sh
    ptybox policy check .ptybox.yaml
    ```

Each block runs in a fresh scratch directory (its workspace) that holds a link `examples` to the
repository's examples/. Its commands run one after another with bash, each on its own (a line
ending in `\\` continues the command; blank lines and `#` comments are skipped), with `ptybox` on
PATH meaning the binary under test, stdin /dev/null and a time limit. Files a command writes stay
for the next command of the block; variables and `cd` do not. A command that exits nonzero fails
the check with the document, line and command.

    run_doc_commands.py SOURCE_DIR PTYBOX [FILE.md...]   (default: README.md and docs/*.md)
"""
import os, pathlib, shutil, subprocess, sys, tempfile

MARKER = "<!-- runnable -->"
TIME_LIMIT_S = 300


def runnable_commands(path):
    """Yields (line number, command) for every command of the file's runnable blocks."""
    lines = path.read_text(encoding="utf-8").splitlines()
    block = 0
    i = 0
    while i < len(lines):
        if lines[i].strip() == MARKER:
            if i + 1 >= len(lines) or not lines[i + 1].startswith("```"):
                raise SystemExit(f"{path}:{i + 1}: `{MARKER}` must be followed by a code fence")
            block += 1
            i += 2
            command, start = "", 0
            while i < len(lines) and not lines[i].startswith("```"):
                text = lines[i]
                if not command:
                    start = i + 1
                if text.endswith("\\"):
                    command += text[:-1] + " "
                elif command or (text.strip() and not text.lstrip().startswith("#")):
                    yield block, start, command + text
                    command = ""
                i += 1
            if i >= len(lines):
                raise SystemExit(f"{path}:{start}: runnable block not closed")
        i += 1


def main():
    source, ptybox = pathlib.Path(sys.argv[1]).resolve(), pathlib.Path(sys.argv[2]).resolve()
    files = [pathlib.Path(f) for f in sys.argv[3:]] or \
        [source / "README.md", *sorted((source / "docs").glob("*.md"))]
    bindir = pathlib.Path(tempfile.mkdtemp(prefix="ptybox-doc-bin-"))
    (bindir / "ptybox").write_text(f'#!/bin/sh\nexec "{ptybox}" "$@"\n')
    (bindir / "ptybox").chmod(0o755)
    env = dict(os.environ, PATH=f"{bindir}:{os.environ.get('PATH', '/usr/bin:/bin')}")
    failures, count, scratch, current = [], 0, None, None
    scratches = [bindir]
    for path in files:
        for block, line, command in runnable_commands(path):
            if current != (path, block):
                current = (path, block)
                scratch = pathlib.Path(tempfile.mkdtemp(prefix="ptybox-doc-"))
                scratches.append(scratch)
                (scratch / "examples").symlink_to(source / "examples")
            count += 1
            where = f"{path.relative_to(source) if path.is_relative_to(source) else path}:{line}"
            print(f"$ {command}    ({where})", flush=True)
            try:
                done = subprocess.run(["bash", "-c", command], cwd=scratch, env=env,
                                      stdin=subprocess.DEVNULL, timeout=TIME_LIMIT_S)
                status = done.returncode
            except subprocess.TimeoutExpired:
                status = f"no exit within {TIME_LIMIT_S} s"
            if status != 0:
                failures.append(f"{where}: `{command}` exited {status}")
    for directory in scratches:
        shutil.rmtree(directory, ignore_errors=True)
    if count == 0:
        raise SystemExit("no runnable command found: the marker is missing from every document")
    for failure in failures:
        print(f"FAILED: {failure}")
    print(f"{count - len(failures)} of {count} documented commands ran successfully")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
