#!/usr/bin/env python3
# Escape probes typed into a real ptybox session by tests/escape/escape_test.cc. Each prints one
# line, "<probe>: ok <what happened>" and exits 0 when the operation succeeded, or
# "<probe>: <ERRNO> <strerror>" and exits 1 when it failed, so a test checks both the exit
# status ($? in the send result) and the reason.
import ctypes
import errno
import fcntl
import os
import socket
import sys
import termios


def fail(name, err):
    if err is None:  # socket.timeout carries no errno
        err = errno.ETIMEDOUT
    print(f"{name}: {errno.errorcode.get(err, str(err))} {os.strerror(err)}")
    sys.exit(1)


def tiocsti(name, high_bits):
    """Injects b"x" into the session's own terminal (fd 0), then reads it back so nothing reaches
    the shell. With high_bits, the request has bit 32 set: the kernel truncates it to TIOCSTI,
    so a filter comparing all 64 bits would be fooled."""
    fd = 0
    saved = termios.tcgetattr(fd)
    raw = termios.tcgetattr(fd)
    raw[3] &= ~(termios.ICANON | termios.ECHO)
    raw[6][termios.VMIN] = 0
    raw[6][termios.VTIME] = 20  # a hang guard: 2 s
    termios.tcsetattr(fd, termios.TCSANOW, raw)
    try:
        if high_bits:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.ioctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_char_p]
            if libc.ioctl(fd, (1 << 32) | termios.TIOCSTI, b"x") != 0:
                fail(name, ctypes.get_errno())
        else:
            try:
                fcntl.ioctl(fd, termios.TIOCSTI, b"x")
            except OSError as e:
                fail(name, e.errno)
        got = os.read(fd, 1)
    finally:
        termios.tcsetattr(fd, termios.TCSANOW, saved)
    print(f"{name}: ok injected {got!r}")


def connect(port):
    try:
        socket.create_connection(("127.0.0.1", int(port)), 2).close()
    except OSError as e:
        fail("connect", e.errno)
    print(f"connect: ok connected to 127.0.0.1:{port}")


def environ(token):
    """Looks for `token` in our environment and in every readable /proc/*/environ."""
    found = [f"env:{k}" for k, v in os.environ.items() if token in k or token in v]
    scanned = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                data = f.read()
        except OSError:
            continue
        scanned += 1
        if token.encode() in data:
            found.append(f"/proc/{pid}/environ")
    if found:
        print("environ: ok found in " + " ".join(found))
        return
    print(f"environ: absent from our environment and {scanned} readable /proc/*/environ")
    sys.exit(1)


def main(argv):
    probes = {
        "tiocsti": lambda: tiocsti("tiocsti", False),
        "tiocsti-high": lambda: tiocsti("tiocsti-high", True),
        "connect": lambda: connect(argv[2]),
        "environ": lambda: environ(argv[2]),
    }
    if len(argv) < 2 or argv[1] not in probes:
        print("usage: escape_probe.py tiocsti|tiocsti-high|connect PORT|environ TOKEN")
        sys.exit(2)
    probes[argv[1]]()


if __name__ == "__main__":
    main(sys.argv)
