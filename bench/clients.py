"""API client construction: CPU per `build_api_client`, by what the kubeconfig says about TLS.

The manager builds a client per controller, each CLI command one, and the test suite hundreds; the
cost that matters is the SSL context behind each (parsing the system trust store is about 27 ms).
Rows: a plain-HTTP server (the embedded cluster's default), an HTTPS server with
`certificate-authority-data`, an HTTPS server verified against the system's roots, and one with
`insecure-skip-tls-verify`. No server is contacted.

Run: `python -m bench.clients [--clients N]`. The last line is one JSON object with the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from apiclient.config import build_api_client
from controller_manager.servingcert import generate_self_signed


def _kubeconfig(folder: Path, name: str, cluster: dict[str, Any]) -> str:
    path = folder / f"{name}.kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": cluster}],
                "users": [{"name": "u", "user": {"token": "bench"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    return str(path)


async def _per_client_ms(kubeconfig: str, clients: int) -> float:
    built = []
    start = time.process_time()
    for _ in range(clients):
        built.append(await build_api_client(kubeconfig=kubeconfig))
    took = time.process_time() - start
    for api in built:
        await api.close()
    return took / clients * 1000


async def main(clients: int) -> dict[str, float]:
    pem = generate_self_signed("127.0.0.1").cert_pem
    ca = base64.b64encode(pem[pem.index(b"-----END CERTIFICATE-----") + 26 :].strip() + b"\n").decode()
    with tempfile.TemporaryDirectory(prefix="bench-clients-") as tmp:
        folder = Path(tmp)
        cases: dict[str, dict[str, Any]] = {
            "http": {"server": "http://127.0.0.1:8080"},
            "https_ca_data": {"server": "https://127.0.0.1:6443", "certificate-authority-data": ca},
            "https_system_roots": {"server": "https://api.example.com:6443"},
            "https_insecure": {"server": "https://127.0.0.1:6443", "insecure-skip-tls-verify": True},
        }
        return {
            f"{name}_ms": round(await _per_client_ms(_kubeconfig(folder, name, cluster), clients), 2)
            for name, cluster in cases.items()
        }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=50)
    args = parser.parse_args()
    figures = asyncio.run(main(args.clients))
    print(f"{'kubeconfig':<22}{'ms CPU/client':>15}")
    for key, value in figures.items():
        print(f"{key.removesuffix('_ms'):<22}{value:>15.2f}")
    print(json.dumps({"clients": args.clients, **figures}))
