#!/usr/bin/python3
"""The "256 sessions at once" phase of bench/compare.py run alone, with the CPU it costs: for
profiling the concurrent opens and sends without the whole suite (wall times on a busy machine
are noisy; the CPU seconds per open and per send are what a change moves).

    bench/fleet.py --ptybox build-release/bin/ptybox [--sessions 256] [--rounds 5]

Prints one line per figure: the open phase's wall time and opens per second, the daemon's CPU
per open (its own, then the sessions' processes: bwrap, ptybox-init, bash, counted from /proc
while they live), the idle memory per session, and the all-at-once send rounds (p50, p99, the
daemon's CPU per send).
"""
import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid, children=False):
    """utime + stime of `pid` (and, with `children`, of its reaped children) in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    own = int(fields[11]) + int(fields[12])
    reaped = int(fields[13]) + int(fields[14]) if children else 0
    return (own + reaped) / TICK


def live_descendants_cpu(ancestor):
    total = 0.0
    for pid in os.listdir("/proc"):
        if pid.isdigit() and compare._descends(int(pid), ancestor):
            try:
                total += cpu_seconds(int(pid))
            except OSError:
                pass
    return total


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ptybox", required=True)
    parser.add_argument("--sessions", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--mode", default="workspace-write")
    args = parser.parse_args()
    workspace = tempfile.mkdtemp(prefix="ptybox-fleet-")
    os.chmod(workspace, 0o755)
    d = compare.Ptybox(os.path.abspath(args.ptybox), workspace, args.mode)
    daemon = d.proc.pid
    idle_before = d.rss_kib()
    cpu_before = cpu_seconds(daemon)
    start = time.perf_counter()
    pending = [d.write("terminal_open", {}) for _ in range(args.sessions)]
    sessions = [d.wait(i)["sessionId"] for i in pending]
    open_seconds = time.perf_counter() - start
    daemon_open_cpu = cpu_seconds(daemon) - cpu_before
    sessions_cpu = live_descendants_cpu(daemon) + cpu_seconds(daemon, True) - cpu_seconds(daemon)
    time.sleep(0.5)
    idle_after = d.rss_kib()
    n = args.sessions
    print(f"opens: {n} in {open_seconds:.2f} s = {n / open_seconds:.1f} opens/s")
    print(f"open cpu: daemon {daemon_open_cpu / n * 1000:.2f} ms/open, sessions' processes "
          f"{sessions_cpu / n * 1000:.2f} ms/open (ticks of {1000 / TICK:.0f} ms)")
    print(f"idle daemon memory: {(idle_after - idle_before) / n:.0f} KiB/session")
    cpu_before = cpu_seconds(daemon)
    latencies = compare.send_rounds(d, sessions, args.rounds)
    send_cpu = cpu_seconds(daemon) - cpu_before
    print(f"send rounds: {args.rounds} x {n}: p50 {compare.fmt_us(compare.percentile(latencies, 50))}"
          f", p99 {compare.fmt_us(compare.percentile(latencies, 99))}, daemon cpu "
          f"{send_cpu / max(1, len(latencies)) * 1e6:.0f} us/send")
    for s in sessions:
        d.write("terminal_close", {"sessionId": s})
    d.close()


if __name__ == "__main__":
    main()
