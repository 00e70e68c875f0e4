"""The manager's lifecycle, in KCM's order, every task owned by an anyio task group.

1. Serve `/metrics` and health at once (a standby replica is alive and ready too).
2. With `--leader-elect`, wait to become leader; a lost lease cancels everything and exits 1.
3. Build every enabled controller (each registers its informers and handlers), start the
   shared informers last, then run each controller's workers (they wait for the caches);
   `/readyz` turns true once the caches have synced.
4. On SIGTERM or SIGINT: stop taking work (queues shut down, queued keys are dropped),
   let in-flight syncs finish within `--shutdown-grace-period`, flush events, release the
   lease, exit 0. A second signal cancels at once.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import signal
from collections.abc import Callable, Iterable
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Protocol

import anyio
import structlog
from anyio.abc import TaskGroup

from apiclient import KubeClient
from apiclient.config import build_api_client, describe_config_error
from apiclient.events import EventBroadcaster
from controller_manager import features, secureserving, webhookcert, webhookendpoints, webhookserver
from controller_manager.embedded import load_plugin
from controller_manager.leaderelection import LeaderElector, LeadershipLost
from controller_manager.loopmonitor import LoopMonitor
from controller_manager.options import ManagerOptions, UsageError
from controller_manager.registry import ControllerDescriptor, ControllerRegistry, default_registry
from controller_manager.server import HealthState, serve
from controllers.common.evacuation import PUBLIC_SURGE_CONTROLLER, SURGING_CONTROLLERS
from controllers.context import ControllerContext, FeatureGates
from controllers.evictionresponder import registration as surge_registration
from controllers.features import EVICTION_REQUEST_API
from controllers.worker import is_expected_failure
from evictionapi import served

if TYPE_CHECKING:
    from controllers.base import Controller
    from informers import SharedInformerFactory

log = structlog.get_logger()

EVENT_FLUSH_TIMEOUT = 5.0


class InformerFactory(Protocol):
    def start(self, tg: TaskGroup) -> None: ...

    async def wait_for_cache_sync(self) -> bool: ...


def _default_factory(client: KubeClient, *, gc_freeze: bool = True) -> SharedInformerFactory:
    """The manager owns its process, so it (not the informers library) decides the GC policy:
    freezing is on unless `--no-gc-freeze` (see `informers.gcpolicy` for why it pays).

    Pods and nodes are cached narrowed (`informers.PROJECTIONS`): a pod in ~1.5 KB instead of
    11-16 KB. The controller suites run on the same projections with every read of a dropped
    field and every mutation of a cached object refused (tests/controllers/projectionguard.py).
    """
    from informers import PROJECTIONS, SharedInformerFactory

    return SharedInformerFactory(client, gc_freeze=gc_freeze, transforms=PROJECTIONS)


def _surge_answers(enabled: list[ControllerDescriptor], gates: FeatureGates) -> bool:
    """Whether this manager answers EvacuationRequests by surging: its own ReplicaSet and Deployment
    controllers run with the gate. Beside KCM's own nobody does, and the drain must not wait."""
    return SURGING_CONTROLLERS <= {d.name for d in enabled} and gates.enabled(
        features.NODE_MAINTENANCE_DEPLOYMENT
    )


# KCM runs these two where the API server serves the built-in EvictionRequest API.
KCM_EVICTION_CONTROLLERS = frozenset(
    {"evictionrequest-controller", "imperative-eviction-responder-controller"}
)


def _leave_builtin_eviction_controllers(
    enabled: list[ControllerDescriptor], api: served.EvictionAPI
) -> list[ControllerDescriptor]:
    """`enabled` without KCM's two EvictionRequest controllers when the server serves the built-in
    API (its KCM runs them: two would race over the same Evictions); as given otherwise."""
    if not api.builtin:
        return enabled
    for d in enabled:
        if d.name in KCM_EVICTION_CONTROLLERS:
            log.info("left to kube-controller-manager: the server serves the built-in API", controller=d.name,
                     group=api.group)  # fmt: skip
    return [d for d in enabled if d.name not in KCM_EVICTION_CONTROLLERS]


async def discover_eviction_api(client: KubeClient, *, max_wait: float = 30.0) -> served.EvictionAPI:
    """Which group serves the EvictionRequest API, asked until the server answers.

    Leading starts here, so a restarting or throttling API server (a 5xx, a 429, a dropped
    connection) must not take the manager down: it is asked again with a doubling wait, as every
    informer's first LIST is. A bug in our own code still raises.
    """
    wait = 1.0
    while True:
        try:
            return await served.discover(client)
        except Exception as exc:
            if not is_expected_failure(exc):
                raise
            log.warning("cannot discover the EvictionRequest API yet", error=str(exc), retry_in=wait)
            await anyio.sleep(wait)
            wait = min(wait * 2, max_wait)


def _implicit_responders(enabled: Iterable[ControllerDescriptor]) -> tuple[tuple[str, int], ...]:
    """The responders aiokcm runs itself, listed on every new Eviction after the pod's own.

    Nobody has to edit a workload to get the surge: with its responder enabled, the evictionrequest
    controller registers it for every pod (it hands a pod it cannot serve on at once).
    """
    if any(d.name == "eviction-responder" for d in enabled):
        return ((surge_registration.RESPONDER_NAME, surge_registration.RESPONDER_PRIORITY),)
    return ()


def _surge_layout(
    enabled: list[ControllerDescriptor], gates: FeatureGates
) -> tuple[list[ControllerDescriptor], bool, bool]:
    """Who surges for evacuating pods: (the controllers to build, in-controller, public API).

    Where this manager runs its own ReplicaSet and Deployment controllers with the gate, they
    answer in-controller and the replacement surge stands aside (two responders for one pod would
    surge twice). Otherwise, beside KCM's own controllers, the replacement surge answers through
    the public API when it is enabled; `--controllers=-replacement-surge` turns that off.
    """
    own = _surge_answers(enabled, gates)
    public = any(d.name == PUBLIC_SURGE_CONTROLLER for d in enabled)
    if own and public:
        log.info(
            "controller stands aside: this manager's ReplicaSet and Deployment controllers surge in-controller",
            controller=PUBLIC_SURGE_CONTROLLER,
        )
        enabled = [d for d in enabled if d.name != PUBLIC_SURGE_CONTROLLER]
        public = False
    return enabled, own, public


class Manager:
    """One manager process's worth of state; `run()` returns the exit code."""

    def __init__(
        self,
        opts: ManagerOptions,
        client: KubeClient,
        *,
        registry: ControllerRegistry | None = None,
        identity: str | None = None,
        factory: Callable[[KubeClient], SharedInformerFactory] | None = None,
    ) -> None:
        self.opts = opts
        self.client = client
        self.registry = registry or default_registry()
        self.factory = factory or functools.partial(_default_factory, gc_freeze=opts.gc_freeze)
        self.health = HealthState()
        self.loop_monitor = LoopMonitor()
        self.health.add_check("event-loop", self.loop_monitor.healthy)
        self.stopping = anyio.Event()
        self.bound_port: int | None = None
        self.webhook_port: int | None = None
        self.controllers: list[Controller] = []
        self._leading = False
        self._election_scope: anyio.CancelScope | None = None
        le = opts.leader_election
        self.elector: LeaderElector | None = None
        if le.enabled:
            # Its own client and rate limiter, as KCM's "leader-election" client: renewals never
            # queue behind controller writes, so the leader's own load cannot cost it the lease.
            self.elector = LeaderElector(
                client.derive("leader-election"),
                namespace=le.namespace,
                name=le.name,
                identity=identity,
                lease_duration=le.lease_duration,
                renew_deadline=le.renew_deadline,
                retry_period=le.retry_period,
            )
            self.health.add_check("leaderElection", self.elector.healthy)
            self.health.ready = True  # a standby is ready; the leader turns unready until synced

    def stop(self) -> None:
        """Begin a graceful stop (what SIGTERM does); safe to call more than once."""
        if self.stopping.is_set():
            return
        log.info("shutting down")
        self.stopping.set()
        if not self._leading and self._election_scope is not None:
            self._election_scope.cancel()

    async def run(self, *, handle_signals: bool = True) -> int:
        code = 0
        async with AsyncExitStack() as stack:
            secure: secureserving.SecureServing | None = None
            if self.opts.secure_port:
                try:
                    secure = await secureserving.prepare(self.opts, stack)
                except secureserving.ClusterLookupError as exc:
                    log.error("cannot serve securely", error=str(exc))
                    return 1
            try:
                async with anyio.create_task_group() as tg:
                    if secure is not None:
                        # First, so a port in use is one line on stderr, as any other bad setting.
                        self.bound_port = await self._listen(tg, secure)
                    log.info(
                        "starting aiokcm",
                        controllers=list(self.opts.controllers),
                        gates=self.opts.gates.effective(),
                    )
                    tg.start_soon(self.loop_monitor.run)
                    if secure is not None:
                        for message, fields in secure.notes:
                            log.warning(message, **fields)
                        log.info(
                            "serving health and metrics",
                            address=self.opts.bind_address,
                            port=self.bound_port,
                            tls=secure.tls is not None,
                            certificate=secure.certificate,
                        )
                    if handle_signals:
                        tg.start_soon(self._watch_signals, tg)
                    await self._elect_and_lead()
                    tg.cancel_scope.cancel()
            except* LeadershipLost as group:
                log.error("leaderelection lost", error=str(group.exceptions[0]))
                code = 1
            except* UsageError as group:
                raise group.exceptions[0] from None
        log.info("exiting", code=code)
        return code

    async def _listen(self, tg: TaskGroup, secure: secureserving.SecureServing) -> int:
        host, port = self.opts.bind_address, self.opts.secure_port
        try:
            bound: int = await tg.start(
                functools.partial(
                    serve, self.health, host=host, port=port, tls=secure.tls, delegation=secure.delegation
                )
            )
        except OSError as exc:
            # A port in use or an address this host does not have: a setting to fix, as a bad flag.
            where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
            reason = os.strerror(exc.errno).lower() if exc.errno else str(exc)
            raise UsageError(
                f"aiokcm run: failed to create listener: failed to listen on {where}: {reason}"
            ) from None
        return bound

    async def _watch_signals(self, tg: TaskGroup) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for signum in signals:
                if self.stopping.is_set():
                    log.warning("second signal, stopping now", signal=signum)
                    tg.cancel_scope.cancel()
                    return
                log.info("received signal", signal=signum)
                self.stop()

    async def _elect_and_lead(self) -> None:
        with anyio.CancelScope() as scope:
            self._election_scope = scope
            if self.stopping.is_set():
                return
            if self.elector is None:
                await self._lead()
            else:
                await self.elector.run(self._lead)

    def _build(
        self, descriptors: list[ControllerDescriptor], ctx: ControllerContext, opts: ManagerOptions
    ) -> list[Controller]:
        built: list[Controller] = []
        for d in descriptors:
            module = d.import_path.partition(":")[0]
            try:
                # A client, and so a rate limiter, per controller, as KCM's controller client builder.
                controller = d.build(dataclasses.replace(ctx, client=self.client.derive(d.name)), opts)
            except ModuleNotFoundError as exc:
                if exc.name is None or not module.startswith(exc.name):
                    raise
                log.error("controller is not installed, skipping it", controller=d.name, module=module)
                continue
            log.info("built controller", controller=d.name)
            built.append(controller)
        return built

    async def _lead(self) -> None:
        """Everything the leader does, until `stop()`; returns once workers are done."""
        self._leading = True
        self.health.ready = False
        opts = self.opts
        enabled = self.registry.enabled(opts.controllers, opts.gates)
        for d in self.registry:
            if d not in enabled and self.registry.is_enabled(d.name, opts.controllers):
                log.warning(
                    "controller is disabled by a feature gate",
                    controller=d.name,
                    required=list(d.required_gates),
                )
        eviction_api = served.AIOKCM
        if any(EVICTION_REQUEST_API in d.required_gates for d in enabled) or (
            opts.eviction_surge.eviction_requests and any(d.name == "eviction-surge" for d in enabled)
        ):
            eviction_api = await discover_eviction_api(self.client)
            enabled = _leave_builtin_eviction_controllers(enabled, eviction_api)
        broadcaster = EventBroadcaster(self.client.derive("events"))
        informers = self.factory(self.client.derive("shared-informers"))
        ctx = ControllerContext(
            client=self.client,
            informers=informers,
            events=broadcaster,
            gates=opts.gates,
            eviction_api=eviction_api,
        )
        enabled, own, public = _surge_layout(enabled, opts.gates)
        maintenance = dataclasses.replace(
            opts.node_maintenance, surge_answers=own or public, bare_replicasets_answer=public
        )
        surge = dataclasses.replace(opts.eviction_surge, public_surge=public)
        requests = dataclasses.replace(
            opts.eviction_request, implicit_responders=_implicit_responders(enabled)
        )
        self.controllers = self._build(
            enabled,
            ctx,
            dataclasses.replace(
                opts, node_maintenance=maintenance, eviction_surge=surge, eviction_request=requests
            ),
        )
        for controller in self.controllers:
            self.health.add_check(controller.name, controller.healthy)
        async with anyio.create_task_group() as tg:
            tg.start_soon(broadcaster.run)
            informers.start(tg)
            tg.start_soon(self._mark_ready, informers)
            webhooks: list[webhookserver.AdmissionWebhook] = [
                c for c in self.controllers if isinstance(c, webhookserver.AdmissionWebhook)
            ]
            if webhooks and opts.webhook.port:
                tg.start_soon(self._serve_webhooks, webhooks)
            async with anyio.create_task_group() as workers:
                for controller in self.controllers:
                    workers.start_soon(self._run_controller, controller)
                await self.stopping.wait()
                for controller in self.controllers:
                    controller.stop()
                if self.health.ready:
                    workers.cancel_scope.deadline = anyio.current_time() + opts.shutdown_grace_period
                else:
                    workers.cancel_scope.cancel()
            if workers.cancel_scope.cancel_called:
                log.warning("in-flight syncs cancelled at the shutdown deadline")
            with anyio.move_on_after(EVENT_FLUSH_TIMEOUT):
                await broadcaster.flush()
            tg.cancel_scope.cancel()
        log.info("controllers stopped")

    async def _serve_webhooks(self, webhooks: list[webhookserver.AdmissionWebhook]) -> None:
        """The webhook port: its certificate first (an eviction is never held up by its absence:
        the configuration's failurePolicy is Ignore), then the routes."""
        hook = self.opts.webhook
        keeper: webhookcert.ManagedCertificate | webhookcert.FileCertificate
        if hook.tls_cert_file:
            keeper = webhookcert.FileCertificate(hook.tls_cert_file, hook.tls_private_key_file)
        else:
            names = webhookcert.Names.for_service(hook.service, hook.namespace, hook.hosts)
            keeper = webhookcert.ManagedCertificate(
                self.client.derive("webhook-certificate"),
                namespace=hook.namespace,
                secret=hook.secret,
                configuration=hook.configuration,
                names=names,
            )
        host = hook.bind_address or self.opts.bind_address
        async with anyio.create_task_group() as tg:
            await tg.start(keeper.run)
            try:
                self.webhook_port = await tg.start(
                    functools.partial(
                        webhookserver.serve, webhooks, host=host, port=hook.port, tls=keeper.tls.context
                    )
                )
            except OSError as exc:
                log.error(
                    "cannot serve the admission webhooks: evictions pass unreviewed",
                    address=host,
                    port=hook.port,
                    error=os.strerror(exc.errno).lower() if exc.errno else str(exc),
                )
                tg.cancel_scope.cancel()
                return
            if hook.advertise_address:
                tg.start_soon(self._advertise_webhook, self.client.derive("webhook-endpoints"))

    async def _advertise_webhook(self, client: KubeClient) -> None:
        """Keep the webhook Service's Endpoints on this leader (retried: a failure only means the
        Service points elsewhere, and evictions there pass unreviewed meanwhile)."""
        hook = self.opts.webhook
        assert self.webhook_port is not None
        port = self.webhook_port
        while True:
            try:
                await webhookendpoints.advertise(
                    client,
                    namespace=hook.namespace,
                    service=hook.service,
                    address=hook.advertise_address,
                    port=port,
                )
            except Exception as exc:
                if not is_expected_failure(exc):
                    raise
                log.warning("cannot point the webhook service at this leader", error=str(exc))
                await anyio.sleep(webhookcert.RETRY_PERIOD)
                continue
            await anyio.sleep(webhookcert.CHECK_PERIOD)

    async def _run_controller(self, controller: Controller) -> None:
        await controller.run()

    async def _mark_ready(self, informers: InformerFactory) -> None:
        if await informers.wait_for_cache_sync():
            self.health.ready = True
            log.info("caches synced, ready")


async def run(opts: ManagerOptions) -> int:
    """Connect (starting the embedded cluster first with `--embedded`) and run a Manager."""
    async with AsyncExitStack() as stack:
        kubeconfig = opts.kubeconfig
        if opts.embedded:
            plugin = load_plugin()
            # Demo arguments only when asked for, so a plugin without the demo still loads.
            demo = {"demo": True, "demo_exit_after_drain": opts.demo_exit_after_drain} if opts.demo else {}
            kubeconfig = await stack.enter_async_context(
                plugin.start_embedded(nodes=opts.embedded_nodes, **demo)
            )
            log.info("embedded local cluster started", kubeconfig=kubeconfig, nodes=opts.embedded_nodes)
            # The embedded cluster reviews tokens and access too: it vouches for the secure port's
            # callers unless other review kubeconfigs are given (its own token may read /metrics).
            serving = opts.serving
            opts = dataclasses.replace(
                opts,
                serving=dataclasses.replace(
                    serving,
                    authentication_kubeconfig=serving.authentication_kubeconfig or kubeconfig,
                    authorization_kubeconfig=serving.authorization_kubeconfig or kubeconfig,
                ),
            )
        try:
            api = await build_api_client(kubeconfig=kubeconfig, master=opts.master)
        except Exception as exc:
            reason = describe_config_error(exc)
            if reason is None:
                raise
            raise UsageError(f"aiokcm run: cannot connect: {reason}") from None
        client = KubeClient(api, qps=opts.kube_api_qps, burst=opts.kube_api_burst)
        stack.push_async_callback(client.close)
        return await Manager(opts, client).run()
