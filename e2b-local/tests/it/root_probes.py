# What root inside a sandbox world tries against the host (confinement.rs runs it as root via
# sudo, and in a template's RUN step). Each probe prints one line, "<probe> refused (<why>)" or
# "<probe> ALLOWED (<what>)". Nothing here changes the host even where a probe is allowed: files
# are only opened for writing, never written (but the world's own disable_ipv6); syscalls get
# arguments that create nothing lasting.
#
# argv: the upper layer's host path ("-": not known), the host's [::] listener port, then the host
# end's IPv6 addresses (none expected).
import ctypes
import errno
import os
import socket
import sys
import time

upper, port, host_addresses = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
libc = ctypes.CDLL(None, use_errno=True)
# keyctl and bpf have no glibc wrapper.
SYSCALLS = {
    "x86_64": {"keyctl": 250, "bpf": 321},
    "aarch64": {"keyctl": 219, "bpf": 280},
}[os.uname().machine]


def report(name, allowed, detail):
    print(f"{name} {'ALLOWED' if allowed else 'refused'} ({detail})", flush=True)


def open_for_writing(name, path):
    try:
        fd = os.open(path, os.O_WRONLY)
    except OSError as e:
        report(name, False, errno.errorcode.get(e.errno, e.errno))
        return
    os.close(fd)
    report(name, True, f"{path} opened for writing")


def libc_call(name, result):
    code = ctypes.get_errno()
    if result == -1:
        report(name, False, errno.errorcode.get(code, code))
    else:
        report(name, True, f"returned {result}")


open_for_writing("core_pattern", "/proc/sys/kernel/core_pattern")
open_for_writing("modprobe", "/proc/sys/kernel/modprobe")
open_for_writing("hostname_sysctl", "/proc/sys/kernel/hostname")
open_for_writing("drop_caches", "/proc/sys/vm/drop_caches")
open_for_writing("sysrq_trigger", "/proc/sysrq-trigger")
open_for_writing("uevent_helper", "/sys/kernel/uevent_helper")
# Turning IPv6 on in the world's own namespace is harmless to the host; it is written for real.
for name, path in [
    ("ipv6_on_eth0", "/proc/sys/net/ipv6/conf/eth0/disable_ipv6"),
    ("ipv6_on_all", "/proc/sys/net/ipv6/conf/all/disable_ipv6"),
]:
    try:
        with open(path, "w") as f:
            f.write("0")
        report(name, True, f"0 written to {path}")
    except OSError as e:
        report(name, False, errno.errorcode.get(e.errno, e.errno))

with open("/proc/self/mountinfo") as f:
    mountinfo = f.read()
shown = [
    option
    for line in mountinfo.splitlines()
    for option in line.split(" - ", 1)[-1].split(" ")[-1].split(",")
    if option.startswith(("upperdir=/", "workdir=/", "lowerdir=/tmp", "lowerdir=/var"))
]
report("upperdir", (upper != "-" and upper in mountinfo) or bool(shown), ", ".join(shown) or "no host path shown")

libc_call("unshare_user", libc.unshare(0x10000000))  # CLONE_NEWUSER
libc_call("unshare_mount", libc.unshare(0x00020000))  # CLONE_NEWNS
libc_call("mount_tmpfs", libc.mount(b"none", b"/mnt", b"tmpfs", 0, None))
libc_call("sethostname", libc.sethostname(b"escaped", 7))
# KEYCTL_GET_KEYRING_ID of the session keyring, created if missing: a key id on success.
libc_call("keyctl", libc.syscall(SYSCALLS["keyctl"], 0, -3, 1))
# BPF_MAP_CREATE with an empty attribute: refused before the attribute is read.
libc_call("bpf", libc.syscall(SYSCALLS["bpf"], 0, None, 0))

# The host's [::] listener, through the host end's IPv6 addresses (after trying to turn IPv6 on).
reached = []
for address in host_addresses:
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        try:
            target = socket.getaddrinfo(f"{address}%eth0", port, socket.AF_INET6)[0][4]
            socket.create_connection(target[:2] if len(target) == 2 else target, timeout=1).close()
            reached.append(address)
            break
        except OSError:
            time.sleep(0.2)
report("host_over_ipv6", bool(reached), ", ".join(reached) or f"{len(host_addresses)} addresses tried")
