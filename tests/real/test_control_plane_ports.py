"""The real plane's harness: a port another process took before our bind costs a retry, not a test."""

from __future__ import annotations

import socket
import urllib.request

from realcluster.controlplane import ControlPlane
from tests.backends import real_assets_or_skip


def test_a_plane_whose_etcd_port_is_taken_starts_on_fresh_ports() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        plane = ControlPlane(real_assets_or_skip(), etcd_port=port, scheduler=False)
        with plane:
            assert plane.etcd_port != port
            assert plane.ready()
            with urllib.request.urlopen(f"http://127.0.0.1:{plane.etcd_port}/health", timeout=5) as answer:
                assert answer.status == 200
