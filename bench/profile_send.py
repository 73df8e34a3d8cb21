#!/usr/bin/python3
"""Where a send's time goes inside the daemon: `ptybox serve --stdio` under callgrind (instruction
counts, repeatable whatever else the machine does) and under `strace -c` (system calls per send),
driving N `echo hi` sends on one session. Writes a markdown section (scripts/bench.sh appends it
to docs/benchmarks.md).

    bench/profile_send.py --ptybox build-release/bin/ptybox --out /tmp/profile.md [--sends 300]
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402


class Wrapped(compare.Ptybox):
    """The daemon started under a tool (valgrind, strace) instead of directly."""

    def __init__(self, prefix, binary, workspace, mode):
        self.proc = subprocess.Popen(prefix + [binary, "serve", "--stdio", "--workspace",
                                               workspace],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, bufsize=0)
        self.ids = 0
        self.buffer = b""
        self.pending = {}
        self.call("policy_set_mode", mode=mode)


def drive(prefix, binary, workspace, mode, sends):  # noqa: D401 (used by strace)
    d = Wrapped(prefix, binary, workspace, mode)
    session = d.open()
    for _ in range(sends):
        result = d.send(session, "echo hi\n")
        assert result["waitReason"] == "stdin_read", result
    d.call("terminal_close", sessionId=session)
    d.close()


def annotate(path, inclusive):
    """{function: instructions} from callgrind_annotate's flat listing."""
    text = subprocess.run(["callgrind_annotate", "--auto=no", f"--inclusive={'yes' if inclusive else 'no'}",
                           "--threshold=100", path],
                          capture_output=True, text=True, check=True).stdout
    table = {}
    for line in text.splitlines():
        m = re.match(r"\s*([\d,]+) \(\s*[\d.]+%\)\s+(\S.*)$", line)
        if not m or m.group(2).startswith(("=>", "*")):
            continue
        name = re.sub(r"\s*\[[^\]]*\]$", "", m.group(2))  # drop the object file
        name = name.split(":", 1)[1] if ":" in name.split("(")[0] else name  # drop the source file
        table[name] = table.get(name, 0) + int(m.group(1).replace(",", ""))
    return table


def callgrind(binary, workspace, mode, sends, scratch):
    def run(n):
        pattern = os.path.join(scratch, f"callgrind.{n}.%p")
        d = Wrapped(["valgrind", "--tool=callgrind", f"--callgrind-out-file={pattern}"],
                    binary, workspace, mode)
        session = d.open()
        for _ in range(n):
            result = d.send(session, "echo hi\n")
            assert result["waitReason"] == "stdin_read", result
        d.call("terminal_close", sessionId=session)
        d.close()
        return os.path.join(scratch, f"callgrind.{n}.{d.proc.pid}")  # the daemon's own file

    # Two runs, n and 2n sends: the difference is the cost of n sends, start-up and open excluded.
    small, large = run(sends), run(2 * sends)
    per_send = (annotate(large, False).get("PROGRAM TOTALS", 0)
                - annotate(small, False).get("PROGRAM TOTALS", 0)) / sends

    def per_send_rows(inclusive, keep):
        a, b = annotate(small, inclusive), annotate(large, inclusive)
        rows = [((b[name] - a.get(name, 0)) / sends, name) for name in b
                if name != "PROGRAM TOTALS" and keep(name)]
        return sorted((r for r in rows if r[0] > 0), reverse=True)

    flat = per_send_rows(False, lambda name: True)[:15]
    # Inclusive costs of ptybox's own functions: which parts of the send path cost what.
    ours = per_send_rows(True, lambda name: name.startswith("ptybox::") and "lambda" not in name)
    return per_send, flat, ours[:20]


def strace_counts(binary, workspace, mode, sends, scratch):
    if not shutil.which("strace"):
        return None
    out = os.path.join(scratch, "strace.txt")
    drive(["strace", "-c", "-o", out], binary, workspace, mode, sends)
    rows = []
    with open(out) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 5 and parts[0][0].isdigit() and parts[-1] != "total":
                calls = int(parts[3])
                rows.append((calls / sends, parts[-1]))
    rows.sort(reverse=True)
    return rows


def short(name, width=110):
    name = name.replace("std::__cxx11::", "std::").replace("basic_string<char, std::char_traits<char>, std::allocator<char> >", "string")
    return name if len(name) <= width else name[: width - 3] + "..."


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ptybox", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--sends", type=int, default=300)
    parser.add_argument("--mode", default="workspace-write")
    args = parser.parse_args()
    binary = os.path.abspath(args.ptybox)
    scratch = tempfile.mkdtemp(prefix="ptybox-profile-")
    workspace = os.path.join(scratch, "ws")
    os.mkdir(workspace)
    os.chmod(scratch, 0o755)
    os.chmod(workspace, 0o755)
    lines = ["## Profile of the send path\n",
             f"`bench/profile_send.py`: the daemon in {args.mode}, {args.sends} and then "
             f"{2 * args.sends} `echo hi` sends on one session; the difference of the two runs "
             f"is the cost of {args.sends} sends (start-up and open excluded).\n"]
    if shutil.which("valgrind") and shutil.which("callgrind_annotate"):
        # valgrind 3.19 has no openat2(2), which a confined spawn needs: the callgrind run opens
        # its session in danger-full-access; a send's path in the daemon is the same in every mode.
        per_send, flat, ours = callgrind(binary, workspace, "danger-full-access", args.sends,
                                         scratch)
        lines.append(f"Callgrind (the session in danger-full-access: valgrind 3.19 lacks "
                     f"openat2, which a confined spawn needs; the daemon's send path is the same "
                     f"in every mode): **{per_send:,.0f} instructions per send** in the daemon "
                     f"(user space).\n")
        lines.append("ptybox's own functions, inclusive (what each part of the path costs):\n")
        lines.append("| instructions per send | % | function (inclusive) |")
        lines.append("| --- | --- | --- |")
        for delta, name in ours:
            lines.append(f"| {delta:,.0f} | {100 * delta / per_send:.0f} | `{short(name)}` |")
        lines.append("")
        lines.append("Hottest functions by their own cost (exclusive):\n")
        lines.append("| instructions per send | % | function (self) |")
        lines.append("| --- | --- | --- |")
        for delta, name in flat:
            lines.append(f"| {delta:,.0f} | {100 * delta / per_send:.0f} | `{short(name)}` |")
        lines.append("")
    calls = strace_counts(binary, workspace, args.mode, args.sends, scratch)
    if calls:
        lines.append("System calls per send (`strace -c`, the daemon alone; counts, "
                     "not times):\n")
        lines.append("| calls per send | system call |")
        lines.append("| --- | --- |")
        for per, name in calls[:15]:
            if per >= 0.1:
                lines.append(f"| {per:.1f} | `{name}` |")
        lines.append("")
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
