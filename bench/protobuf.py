"""Protobuf codec cost: decoding request bodies, encoding answers, and a protobuf LIST of many pods.

    python -m bench.protobuf                 # 2,000 pods
    python -m bench.protobuf --pods 10000

The codec is pure Python (see localcluster/protobuf/wire.py for why), so its cost per object is
what matters: a request body is decoded once, but a LIST or a watch answered in protobuf encodes
every object (a LIST yields to the event loop every 50). Stored objects are encoded once and cached
by their bytes (4,096 of them), so the second LIST of the same objects is the cached figure. The object is the
real-tier sample pod (probes, volumes, env, resources, affinity: larger than most). The last line
is one JSON object with the figures.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import orjson

from localcluster.protobuf import decode_body, encode_body, encode_items, encode_list
from tests.real.protobuf_samples import samples


def _per_call_us(fn: Any, n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--pods", type=int, default=2000)
    args = parser.parse_args()
    pod = decode_body(encode_body(next(obj for _, obj in samples() if obj["kind"] == "Pod")))
    raw, body = orjson.dumps(pod), encode_body(pod)
    raws = [
        orjson.dumps({**pod, "metadata": {**pod["metadata"], "name": f"p-{i}"}}) for i in range(args.pods)
    ]
    start = time.perf_counter()
    encode_list("v1", "PodList", {"resourceVersion": "1"}, encode_items("v1", "Pod", raws))
    cold = time.perf_counter() - start
    start = time.perf_counter()
    encode_list("v1", "PodList", {"resourceVersion": "1"}, encode_items("v1", "Pod", raws))
    warm = time.perf_counter() - start
    start = time.perf_counter()
    b",".join(raws)  # what the JSON LIST costs: the stored bytes joined
    json_list = time.perf_counter() - start
    result = {
        "pod_json_bytes": len(raw),
        "pod_protobuf_bytes": len(body),
        "decode_pod_us": round(_per_call_us(lambda: decode_body(body), 500), 1),
        "encode_pod_us": round(_per_call_us(lambda: encode_body(orjson.loads(raw)), 500), 1),
        "pods": args.pods,
        "protobuf_list_cold_ms": round(cold * 1e3, 1),
        "protobuf_list_cached_ms": round(warm * 1e3, 1),
        "json_list_ms": round(json_list * 1e3, 2),
    }
    width = max(map(len, result))
    print("protobuf codec benchmark")
    for key, value in result.items():
        print(f"  {key:<{width}}  {value}")
    print(orjson.dumps(result).decode())


if __name__ == "__main__":
    main()
