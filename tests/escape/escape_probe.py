#!/usr/bin/env python3
# Escape probes typed into a real ptybox session by tests/escape/escape_test.cc. Each prints one
# line, "<probe>: ok <what happened>" and exits 0 when the operation succeeded, or
# "<probe>: <ERRNO> <strerror>" and exits 1 when it failed, so a test checks both the exit
# status ($? in the send result) and the reason.
import ctypes
import errno
import fcntl
import os
import shutil
import socket
import stat
import struct
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


def loopback(host):
    """A dev server (http.server on a free port) bound to `host` and a client of the same process
    fetching a page from it: what `python3 -m http.server --bind 127.0.0.1` and a test database
    need. Proxies are ignored: the request must go to the address itself."""
    import http.server
    import threading
    import urllib.request

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = b"ptybox-loopback"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    class Server(http.server.ThreadingHTTPServer):
        address_family = socket.AF_INET6 if ":" in host else socket.AF_INET

    name = f"loopback {host}"
    try:
        server = Server((host, 0), Handler)
    except OSError as e:
        fail(name, e.errno)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    url = f"http://[{host}]:{port}/" if ":" in host else f"http://{host}:{port}/"
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=60) as response:
            body = response.read().decode()
            status = response.status
    except OSError as e:
        fail(name, getattr(e, "errno", None) or getattr(getattr(e, "reason", None), "errno", None))
    server.shutdown()
    print(f"{name}: ok {status} {body}")


def rawsockets():
    """One line per socket a loopback does not need: "raw <what> <ok|ERRNO>"."""
    attempts = [
        ("inet-raw-icmp", socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP),
        ("inet6-raw-icmpv6", socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6),
        ("inet-sock-packet", socket.AF_INET, 10, 0x0300),  # SOCK_PACKET, ETH_P_ALL (network order)
        ("packet-raw", socket.AF_PACKET, socket.SOCK_RAW, 0x0300),
        ("netlink-netfilter", socket.AF_NETLINK, socket.SOCK_RAW, 12),
    ]
    for what, family, kind, proto in attempts:
        try:
            socket.socket(family, kind, proto).close()
            result = "ok"
        except OSError as e:
            result = errno.errorcode.get(e.errno, str(e.errno))
        print(f"raw {what} {result}")


def interfaces():
    """The interfaces netlink (NETLINK_ROUTE, as `ip addr` and getifaddrs use) reports."""
    try:
        names = sorted(name for _, name in socket.if_nameindex())
    except OSError as e:
        fail("interfaces", e.errno)
    print("interfaces: ok " + " ".join(names))


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


def setid(directory):
    """Every way to leave a set-user-id or set-group-id file (or a file capability) in
    `directory`: a line per attempt, "setid <case> <ok|ERRNO>", then one summary line,
    "setid-summary EPERM:<count> <errno>:<cases>... ok:<cases>", that a test reads whole."""
    libc = ctypes.CDLL(None, use_errno=True)
    at_fdcwd = -100
    dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    results = {}

    def check(rc):
        if rc < 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))

    def shell(name):
        """A copy of a shell, as the attack uses (cp /bin/dash x)."""
        path = os.path.join(directory, name)
        shutil.copyfile(os.path.realpath("/bin/sh"), path)
        os.chmod(path, 0o755)
        return path

    def attempt(case, fn):
        try:
            fn()
            results[case] = "ok"
        except OSError as e:
            results[case] = errno.errorcode.get(e.errno, str(e.errno))
        print(f"setid {case} {results[case]}")

    def via_proc_fd():
        fd = os.open(shell("procfd4755"), os.O_PATH)
        os.chmod(f"/proc/self/fd/{fd}", 0o4755)

    def tmpfile():
        """The open is the attempt; linking the file in is best effort (some filesystems answer
        EXDEV through /proc), so a mode that survived also shows on the host when it can."""
        fd = os.open(directory, os.O_TMPFILE | os.O_WRONLY, 0o4755)
        try:
            os.link(f"/proc/self/fd/{fd}", os.path.join(directory, "tmpfile4755"))
        except OSError:
            pass

    def openat2():
        how = struct.pack("QQQ", os.O_CREAT | os.O_WRONLY, 0o4755, 0)
        check(libc.syscall(437, dfd, b"openat2-4755", how, len(how)))

    # VFS_CAP_REVISION_2 with the effective flag, permitting CAP_SYS_ADMIN.
    capability = struct.pack("<IIIII", 0x02000001, 1 << 21, 0, 0, 0)
    attempt("chmod4755", lambda: os.chmod(shell("chmod4755"), 0o4755))
    attempt("chmod2755", lambda: os.chmod(shell("chmod2755"), 0o2755))
    attempt("fchmod6755", lambda: os.fchmod(os.open(shell("fchmod6755"), os.O_RDONLY), 0o6755))
    attempt("fchmodat-us", lambda: check(libc.fchmodat(at_fdcwd, shell("fchmodat-us").encode(),
                                                       0o4755, 0)))
    attempt("fchmodat2", lambda: check(libc.syscall(452, at_fdcwd, shell("fchmodat2").encode(),
                                                     0o4755, 0)))
    attempt("procfd4755", via_proc_fd)
    attempt("open4755", lambda: os.open(os.path.join(directory, "open4755"),
                                        os.O_CREAT | os.O_WRONLY, 0o4755))
    attempt("openat6755", lambda: os.open("openat6755", os.O_CREAT | os.O_WRONLY, 0o6755,
                                          dir_fd=dfd))
    attempt("creat2755", lambda: check(libc.creat(os.path.join(directory, "creat2755").encode(),
                                                  0o2755)))
    attempt("tmpfile4755", tmpfile)
    attempt("mknod6755", lambda: os.mknod(os.path.join(directory, "mknod6755"),
                                          stat.S_IFREG | 0o6755))
    attempt("mknodat4755", lambda: os.mknod("mknodat4755", stat.S_IFREG | 0o4755, dir_fd=dfd))
    attempt("mkdir2755", lambda: os.mkdir(os.path.join(directory, "mkdir2755"), 0o2755))
    attempt("mkdirat2755", lambda: os.mkdir("mkdirat2755", 0o2755, dir_fd=dfd))
    attempt("openat2", openat2)
    attempt("setcap", lambda: os.setxattr(shell("setcap"), "security.capability", capability))
    setuid_binaries = [p for p in ("/usr/bin/passwd", "/usr/bin/su", "/usr/bin/mount")
                       if os.path.exists(p) and os.stat(p).st_mode & stat.S_ISUID]
    if setuid_binaries:
        # A hard link of the host's own set-id file: across mounts, so EXDEV when confined.
        attempt("link-setuid", lambda: os.link(setuid_binaries[0],
                                               os.path.join(directory, "link-setuid")))
    attempt("chmod750", lambda: os.chmod(shell("chmod750"), 0o750))
    groups = {}
    for case, result in results.items():
        groups.setdefault(result, []).append(case)
    summary = [f"EPERM:{len(groups.pop('EPERM', []))}"]
    summary += [f"{result}:{','.join(cases)}" for result, cases in sorted(groups.items())]
    print("setid-summary " + " ".join(summary))


def mounts():
    """Every mount this process can reach lacking nosuid, or nodev (device nodes bwrap binds under
    /dev need device access and are counted apart): "mounts checked:<n> dev:<n> hidden:<n>
    offenders:<n>", after one "mount-without <option> <mountpoint>" line per offender. A mount
    covered by a later one (bwrap's recursive bind of / brings the host's /dev/shm and /dev/pts
    under its own /dev) is counted as hidden: no path reaches it."""
    checked = dev = hidden = 0
    offenders = []
    with open("/proc/self/mountinfo") as f:
        lines = f.read().splitlines()
    for line in lines:
        fields = line.split()
        mount_id, point, options = fields[0], fields[4], fields[5].split(",")
        fstype = fields[fields.index("-") + 1]
        try:
            fd = os.open(point, os.O_PATH | os.O_NOFOLLOW)
            with open(f"/proc/self/fdinfo/{fd}") as info:
                reached = [l.split()[1] for l in info if l.startswith("mnt_id:")]
            os.close(fd)
        except OSError:
            reached = []
        if reached != [mount_id]:
            hidden += 1
            continue
        checked += 1
        if "nosuid" not in options:
            offenders.append(("nosuid", point))
        if "nodev" not in options:
            if point.startswith("/dev/") and (fstype == "devpts" or point.count("/") == 2):
                dev += 1
            else:
                offenders.append(("nodev", point))
    for option, point in offenders:
        print(f"mount-without {option} {point}")
    print(f"mounts checked:{checked} dev:{dev} hidden:{hidden} offenders:{len(offenders)}")


def unix(abstract_name, path, late_path=None):
    """Connects to the host's abstract socket `abstract_name` and pathname socket `path` (and
    `late_path`, one bound after the session started), and to an abstract socket of our own: one
    line each, "unix <which> <ok|ERRNO>"."""
    def attempt(which, address, own=None):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(5)
        try:
            s.connect(address)
            result = "ok"
        except OSError as e:
            result = errno.errorcode.get(e.errno, str(e.errno)) if e.errno else "ETIMEDOUT"
        finally:
            s.close()
            if own is not None:
                own.close()
        print(f"unix {which} {result}")

    attempt("host-abstract", "\0" + abstract_name)
    attempt("host-path", path)
    if late_path is not None:
        attempt("host-late-path", late_path)
    own = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    own_name = "\0" + abstract_name + "-own"
    own.bind(own_name)
    own.listen(1)
    attempt("own-abstract", own_name, own)


def main(argv):
    probes = {
        "tiocsti": lambda: tiocsti("tiocsti", False),
        "tiocsti-high": lambda: tiocsti("tiocsti-high", True),
        "connect": lambda: connect(argv[2]),
        "environ": lambda: environ(argv[2]),
        "setid": lambda: setid(argv[2]),
        "mounts": mounts,
        "unix": lambda: unix(argv[2], argv[3], argv[4] if len(argv) > 4 else None),
        "loopback": lambda: loopback(argv[2]),
        "raw": rawsockets,
        "interfaces": interfaces,
    }
    if len(argv) < 2 or argv[1] not in probes:
        print("usage: escape_probe.py tiocsti|tiocsti-high|connect PORT|environ TOKEN|setid DIR|mounts|unix NAME PATH [LATE_PATH]|loopback HOST|raw|interfaces")
        sys.exit(2)
    probes[argv[1]]()


if __name__ == "__main__":
    main(sys.argv)
