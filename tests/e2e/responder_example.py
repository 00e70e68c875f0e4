"""An eviction responder: what a team writes to have a say before its pods are evicted.

A pod names its responders, each with a priority, in the `lifecycle.aiokcm.io/eviction-responders`
annotation (a JSON list of `{"name", "priority"}`). When someone asks for the pod's eviction (an
EvictionRequest), aiokcm makes an Eviction for the pod and hands it to the responders one at a
time, highest priority first, by setting their state to `Active` in `status.targetResponders`.
The Active responder does its part (hand over leadership, flush a cache, drain connections...),
heartbeats in its own `status.responders` entry at least every 20 minutes, and sets
`completionTime` when done; then the next responder gets its turn, and last the default
`imperative-eviction.k8s.io/evictor` evicts the pod through the Eviction API (so
PodDisruptionBudgets still apply). A responder that stops heartbeating loses its turn
(`Interrupted`); one whose eviction everybody withdrew sees `Canceled` and should undo its work.

This responder needs nothing but kubernetes_asyncio: it watches the Evictions of a namespace
with `CustomObjectsApi`, runs `work(eviction)` when it becomes Active, heartbeats meanwhile, and
reports completion; it stops the work if its turn ends first.

    responder = Responder(api_client, "example.com/cache-drainer", "default", drain_cache)
    await responder.run()  # until cancelled
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import anyio
from anyio.abc import TaskGroup
from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client.rest import ApiException

GROUP, VERSION, PLURAL = "lifecycle.aiokcm.io", "v1alpha1", "evictions"

Eviction = dict[str, Any]
Work = Callable[[Eviction], Awaitable[None]]


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def state_of(eviction: Eviction, responder: str) -> str | None:
    """This responder's state in the Eviction (None when the pod does not name it)."""
    for target in (eviction.get("status") or {}).get("targetResponders") or []:
        if target.get("name") == responder:
            return str(target.get("state"))
    return None


def completed(eviction: Eviction, responder: str) -> bool:
    for entry in (eviction.get("status") or {}).get("responders") or []:
        if entry.get("name") == responder:
            return bool(entry.get("completionTime"))
    return False


class Responder:
    def __init__(
        self,
        api: client.ApiClient,
        name: str,
        namespace: str,
        work: Work,
        *,
        heartbeat_seconds: float = 60.0,
    ) -> None:
        self.objects = client.CustomObjectsApi(api)
        self.name = name
        self.namespace = namespace
        self.work = work
        self.heartbeat_seconds = heartbeat_seconds
        self._turns: dict[str, anyio.CancelScope] = {}  # Eviction uid -> the work under way

    async def run(self) -> None:
        async with anyio.create_task_group() as tg:
            while True:
                try:
                    async with watch.Watch() as events:
                        stream = events.stream(
                            self.objects.list_namespaced_custom_object,
                            GROUP,
                            VERSION,
                            self.namespace,
                            PLURAL,
                            timeout_seconds=300,
                        )
                        async for event in stream:
                            self.observe(tg, event["type"], event["object"])
                except ApiException as exc:
                    if exc.status != 410:  # 410: our place in the history is gone; start over
                        raise

    def observe(self, tg: TaskGroup, kind: str, eviction: Eviction) -> None:
        """Start the work on our turn; stop it when the turn ends (or the Eviction is gone)."""
        uid = eviction["metadata"]["uid"]
        mine = state_of(eviction, self.name) == "Active" and not completed(eviction, self.name)
        if kind != "DELETED" and mine and uid not in self._turns:
            self._turns[uid] = anyio.CancelScope()
            tg.start_soon(self.respond, eviction, self._turns[uid])
        elif (kind == "DELETED" or not mine) and uid in self._turns:
            self._turns.pop(uid).cancel()

    async def respond(self, eviction: Eviction, scope: anyio.CancelScope) -> None:
        with scope:
            await self.report(eviction, message="started")
            async with anyio.create_task_group() as heartbeats:
                heartbeats.start_soon(self.heartbeat, eviction)
                await self.work(eviction)
                heartbeats.cancel_scope.cancel()
            await self.report(eviction, message="done", completionTime=now())

    async def heartbeat(self, eviction: Eviction) -> None:
        while True:
            await anyio.sleep(self.heartbeat_seconds)
            await self.report(eviction, message="working")

    async def report(self, eviction: Eviction, **fields: str) -> None:
        """Update our own entry in `status.responders`, nobody else's.

        Read, change, write back with the resourceVersion read: a conflict means someone else
        (the controller, another responder) wrote in between, so read again.
        """
        name = eviction["metadata"]["name"]
        while True:
            current = await self.objects.get_namespaced_custom_object(
                GROUP, VERSION, self.namespace, PLURAL, name
            )
            entries = current.setdefault("status", {}).setdefault("responders", [])
            entry = next((e for e in entries if e.get("name") == self.name), None)
            if entry is None:
                entry = {"name": self.name}
                entries.append(entry)
            entry.update(fields, heartbeatTime=now())
            try:
                await self.objects.replace_namespaced_custom_object_status(
                    GROUP, VERSION, self.namespace, PLURAL, name, current
                )
                return
            except ApiException as exc:
                if exc.status != 409:
                    raise
