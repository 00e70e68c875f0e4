"""Ports for servers that a test or bench starts in another process.

A port the kernel hands out for `bind(("127.0.0.1", 0))` comes from the ephemeral range, the range
it also draws outgoing connections' source ports from. Between the probe closing its socket and the
child process binding the port, any connection on the machine (an etcd client, a watch, another
test's server) may take it as its source port, and the child exits with "address already in use".
Ports below that range are never handed out as source ports, so only another probe can race for one;
the ports this process handed out are remembered so that it never hands out one twice.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

_LOWEST = 10000
_FALLBACK_EPHEMERAL_START = 32768
_handed_out: set[int] = set()
_random = random.SystemRandom()


def _ephemeral_start() -> int:
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return _FALLBACK_EPHEMERAL_START
    return low if low > _LOWEST + 1000 else _FALLBACK_EPHEMERAL_START


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A loopback TCP port that nothing listens on, from below the ephemeral range."""
    top = _ephemeral_start()
    for _ in range(200):
        port = _random.randrange(_LOWEST, top)
        if port not in _handed_out and _bindable(port):
            _handed_out.add(port)
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:  # a crowded machine: the kernel's pick
        sock.bind(("127.0.0.1", 0))
        picked: int = sock.getsockname()[1]
        return picked
