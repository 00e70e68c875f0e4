"""`pods/log`, and a clear refusal for `pods/exec`, `attach` and `portforward`.

The simulated kubelets run no processes, so a container's log is a short account of what the
kubelet did with it (image, node, start, and stop when it stopped), written as the kubelet
serves logs: `text/plain`, `timestamps` prefixing each line with an RFC 3339 time, `tailLines`,
`limitBytes` and `sinceSeconds` applied, `follow` holding the stream open until the container
stops or the client goes. The errors are the apiserver's and kubelet's: a container name
required when the pod has several, an unknown one, a container still waiting to start, no
previous instance. A pod not yet bound to a node has an empty log, as the apiserver answers
when there is no kubelet to ask.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from typing import Any

import anyio
from aiohttp import web

from kubeutil.timestamps import parse_time
from localcluster import errors
from localcluster.objects import ObjectAPI
from localcluster.storage import StoredEvent

Obj = dict[str, Any]
UNSUPPORTED = ("exec", "attach", "portforward")
#: Seconds between checks that a `follow` client is still there.
_CLIENT_CHECK_INTERVAL = 2.0


def _stamp(when: dt.datetime) -> str:
    """RFC 3339 with nanoseconds, as the kubelet prefixes lines with `timestamps=true`."""
    return when.strftime("%Y-%m-%dT%H:%M:%S.%f") + "000Z"


def container_lines(pod: Obj, container: Obj, status: Obj) -> list[tuple[dt.datetime, str]]:
    """What the simulated container 'printed': when it started, where, and when it stopped."""
    state = status.get("state") or {}
    running = state.get("running") or {}
    terminated = state.get("terminated") or {}
    started = parse_time(running.get("startedAt") or terminated.get("startedAt")) or dt.datetime.now(dt.UTC)
    node = (pod.get("spec") or {}).get("nodeName", "")
    lines = [
        (
            started,
            f"simulated container {container['name']} started from image {container.get('image', '')} on node {node}",
        ),
        (started, "localcluster runs no processes: this log records what the simulated kubelet did"),
    ]
    if terminated:
        finished = parse_time(terminated.get("finishedAt")) or started
        lines.append(
            (
                finished,
                f"stopped with exit code {terminated.get('exitCode', 0)} ({terminated.get('reason', '')})",
            )
        )
    return lines


def _container(pod: Obj, wanted: str | None) -> tuple[Obj, Obj | None]:
    """The container a log request names (`ValidateContainer` / the kubelet's lookup), and its status."""
    spec, name = pod.get("spec") or {}, pod["metadata"]["name"]
    containers = list(spec.get("containers") or [])
    init = list(spec.get("initContainers") or [])
    if not wanted:
        if len(containers) == 1:
            wanted = containers[0]["name"]
        else:
            names = " ".join(c["name"] for c in containers)
            message = f"a container name must be specified for pod {name}, choose one of: [{names}]"
            if init:
                message += f" or one of the init containers: [{' '.join(c['name'] for c in init)}]"
            raise errors.bad_request(message)
    container = next((c for c in containers + init if c.get("name") == wanted), None)
    if container is None:
        raise errors.bad_request(f"container {wanted} is not valid for pod {name}")
    status = pod.get("status") or {}
    statuses = (status.get("containerStatuses") or []) + (status.get("initContainerStatuses") or [])
    return container, next((s for s in statuses if s.get("name") == wanted), None)


class PodLogs:
    def __init__(self, objects: ObjectAPI) -> None:
        self.objects = objects
        self._pod_rt = objects.registry.require("", "v1", "pods")

    async def handle_log(self, request: web.Request, target: Any) -> web.StreamResponse:
        if request.method != "GET":
            raise errors.method_not_allowed(
                f"the server does not allow this method on the requested resource ({request.method} pods)"
            )
        q = request.query
        pod = self.objects.get(self._pod_rt, target.namespace, target.name)
        container, status = _container(pod, q.get("container"))
        if q.get("previous") in ("true", "1"):
            raise errors.bad_request(
                f'previous terminated container "{container["name"]}" in pod "{pod["metadata"]["name"]}" not found'
            )
        lines: list[tuple[dt.datetime, str]] = []
        if (pod.get("spec") or {}).get("nodeName"):
            state = (status or {}).get("state") or {}
            if not state.get("running") and not state.get("terminated"):
                reason = (state.get("waiting") or {}).get("reason") or "ContainerCreating"
                raise errors.bad_request(
                    f'container "{container["name"]}" in pod "{pod["metadata"]["name"]}" is waiting to start: {reason}'
                )
            lines = container_lines(pod, container, status or {})
        body = self._render(lines, q)
        response = web.StreamResponse(headers={"Content-Type": "text/plain"})
        await response.prepare(request)
        await response.write(body)
        terminated = bool(((status or {}).get("state") or {}).get("terminated"))
        if q.get("follow") in ("true", "1") and lines and not terminated:
            with contextlib.suppress(ConnectionResetError):
                await self._follow(request, response, pod, container["name"], q)
        with contextlib.suppress(ConnectionResetError):
            await response.write_eof()
        return response

    @staticmethod
    def _render(lines: list[tuple[dt.datetime, str]], q: Any) -> bytes:
        since = q.get("sinceSeconds")
        if since and since.isdigit():
            cutoff = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=int(since))
            lines = [(when, text) for when, text in lines if when >= cutoff]
        tail = q.get("tailLines")
        if tail and tail.isdigit():
            lines = lines[len(lines) - int(tail) :] if int(tail) else []
        stamped = q.get("timestamps") in ("true", "1")
        body = "".join(
            f"{_stamp(when)} {text}\n" if stamped else f"{text}\n" for when, text in lines
        ).encode()
        limit = q.get("limitBytes")
        if limit and limit.isdigit():
            body = body[: int(limit)]
        return body

    async def _follow(
        self, request: web.Request, response: web.StreamResponse, pod: Obj, container: str, q: Any
    ) -> None:
        """Hold the stream until the container stops (its last line is written), the pod goes
        or the client does (looked at every few seconds, as nothing is written meanwhile)."""
        meta = pod["metadata"]
        namespace, name, uid = meta["namespace"], meta["name"], meta["uid"]

        def mine(ev: StoredEvent) -> str | None:
            return ev.type if ev.namespace == namespace and ev.obj["metadata"]["name"] == name else None

        with self.objects.storage.subscribe("pods", flt=mine) as sub:
            while not sub.closed:
                with anyio.move_on_after(_CLIENT_CHECK_INTERVAL):
                    await sub.wait()
                if request.transport is None or request.transport.is_closing():
                    return
                for ev in sub.drain():
                    obj = ev.obj
                    if ev.type == "DELETED" or obj["metadata"]["uid"] != uid:
                        return
                    statuses = (obj.get("status") or {}).get("containerStatuses") or []
                    status: Obj = next((s for s in statuses if s.get("name") == container), {})
                    if (status.get("state") or {}).get("terminated"):
                        spec = next(
                            c
                            for c in (obj.get("spec") or {}).get("containers") or []
                            if c.get("name") == container
                        )
                        last = container_lines(obj, spec, status)[-1:]
                        await response.write(
                            self._render(last, {k: v for k, v in q.items() if k == "timestamps"})
                        )
                        return

    async def handle_unsupported(self, request: web.Request, target: Any) -> web.StreamResponse:
        raise errors.bad_request(
            f"{target.subresource} is not supported by the embedded cluster: its containers are simulated and run no "
            "processes (use a real cluster for kubectl exec, attach and port-forward)"
        )


def install(rest: Any, objects: ObjectAPI) -> PodLogs:
    """Serve `pods/log` and refuse `pods/exec|attach|portforward` (`RestHandlers.subresource_handlers`)."""
    logs = PodLogs(objects)
    rest.subresource_handlers[("pods", "log")] = logs.handle_log
    for sub in UNSUPPORTED:
        rest.subresource_handlers[("pods", sub)] = logs.handle_unsupported
    return logs
