#!/usr/bin/env python3
"""The installed documentation, as a newcomer reads it after `cmake --install`.

Installs the build's `ptybox` component (the docs and the man page) into a scratch prefix, then
checks that every relative link of every installed Markdown file (README.md, docs/*.md) names a
file that was installed, and that the man page documents the flags and variables people meet
first (--audit-log, --record, --connect, PTYBOX_LOG, `ptybox help`).

    check_installed_docs.py BUILD_DIR
"""
import gzip, pathlib, re, subprocess, sys, tempfile

LINK = re.compile(r"\]\(([^)\s]+)\)")
MAN_WORDS = [r"\-\-audit\-log", r"\-\-record", r"\-\-connect", "PTYBOX_LOG", "ptybox help",
             "ptybox attach", "ptybox ls", r"\-\-token\-file"]


def main():
    build = pathlib.Path(sys.argv[1]).resolve()
    failures = []
    with tempfile.TemporaryDirectory(prefix="ptybox-install-") as prefix:
        subprocess.run(["cmake", "--install", str(build), "--prefix", prefix,
                        "--component", "ptybox"], check=True, stdout=subprocess.DEVNULL)
        root = pathlib.Path(prefix)
        docdir = root / "share/doc/ptybox"
        readme = docdir / "README.md"
        if not readme.is_file():
            failures.append(f"{readme} was not installed")
        pages = sorted(docdir.rglob("*.md"))
        links = 0
        for page in pages:
            for target in LINK.findall(page.read_text(encoding="utf-8")):
                if re.match(r"^[a-z]+:", target) or target.startswith("#"):
                    continue  # a URL or an anchor of the same page
                links += 1
                path = target.split("#", 1)[0]
                if not (page.parent / path).exists():
                    failures.append(f"{page.relative_to(root)}: the link ({target}) names "
                                    f"{(page.parent / path).resolve().relative_to(root)}, "
                                    "which was not installed")
        man = root / "share/man/man1/ptybox.1.gz"
        text = gzip.decompress(man.read_bytes()).decode() if man.is_file() else ""
        if not text:
            failures.append(f"{man} was not installed")
        for word in MAN_WORDS:
            if text and word not in text:
                failures.append(f"the man page does not mention {word}")
    for failure in failures:
        print("FAILED:", failure)
    if failures:
        return 1
    print(f"{len(pages)} installed pages, {links} relative links, each resolves; "
          "the man page names every flag checked")
    return 0


if __name__ == "__main__":
    sys.exit(main())
