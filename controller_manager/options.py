"""`aiokcm run` flags, named and defaulted as kube-controller-manager names and defaults them.

Parsing turns the command line into one frozen `ManagerOptions`; every rule a user can break
(an unknown controller, an unknown or locked feature gate, lease timings that cannot work) is
checked here, so the CLI can answer a bad command line with one line and exit code 2 before
anything starts.

A controller's settings land in its typed config (`controllers/<name>/config.py`), whose defaults
are the flags' defaults: they are written once, in the config class.
"""

from __future__ import annotations

import argparse
import ipaddress
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Literal, NoReturn

from controller_manager import features
from controller_manager.registry import ControllerRegistry
from controllers.evictionrequest.config import EvictionRequestConfig
from controllers.evictionsurge.config import REQUEST_MODES, REQUESTS_EVICTION_REQUEST, EvictionSurgeConfig
from controllers.nodelifecycle.config import NodeLifecycleConfig
from controllers.nodemaintenance.config import NodeMaintenanceConfig
from controllers.nodemaintenance.rollout import LimitError, scaled

JITTER_FACTOR = 1.2  # client-go leaderelection.JitterFactor

_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


class UsageError(Exception):
    """A bad command line: the CLI prints the message on one line and exits 2."""


class OneLineParser(argparse.ArgumentParser):
    """argparse, but an error is one line and raises `UsageError` instead of printing usage."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message}")


def parse_duration(text: str) -> float:
    """Go's `time.ParseDuration` (`15s`, `1m30s`, `250ms`) in seconds; a bare number means seconds."""
    raw = text.strip()
    if not raw:
        raise argparse.ArgumentTypeError("empty duration")
    try:
        return float(raw)
    except ValueError:
        pass
    sign = -1.0 if raw.startswith("-") else 1.0
    body = raw.lstrip("+-")
    pos, total = 0, 0.0
    for match in _DURATION_PART.finditer(body):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        pos = match.end()
    if pos != len(body) or pos == 0:
        raise argparse.ArgumentTypeError(f"invalid duration {text!r} (examples: 15s, 1m30s, 500ms)")
    return sign * total


def format_duration(seconds: float) -> str:
    """Go's `time.Duration.String` for whole and fractional seconds (`50s`, `1m0s`, `1.5s`), so a
    duration flag's default reads in `--help` as KCM's does and parses back to the same value."""
    whole_minutes, rest = divmod(seconds, 60.0)
    minutes = int(whole_minutes)
    hours, minutes = divmod(minutes, 60)
    text = f"{rest:g}s"
    if hours:
        return f"{hours}h{minutes}m{text}"
    return f"{minutes}m{text}" if minutes else text


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid integer {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def _int_or_percent(text: str) -> int | str:
    """A count (`3`) or a percentage (`50%`), as an `IntOrString` flag takes it."""
    raw = text.strip()
    value: int | str = int(raw) if raw.isdigit() else raw
    try:
        scaled(value, 100, field_name="value", minimum=0)
    except LimitError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("value: ")) from None
    return value


def _non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid number {text!r}") from None
    if not math.isfinite(value):
        # float() takes "nan" and "inf"; a rate of nan compares false with everything and turns
        # every limit off, so a typo would silently remove client-side throttling.
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def _port(text: str) -> int:
    """KCM's SecureServingOptions.Validate range; 0 turns serving off."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid integer {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(
            f"{value} must be between 0 and 65535, inclusive. 0 for turning off secure port"
        )
    return value


def _ip_address(text: str) -> str:
    """pflag's IP flag: an IPv4 or IPv6 address, nothing else (no host names)."""
    try:
        return str(ipaddress.ip_address(text.strip()))
    except ValueError:
        raise argparse.ArgumentTypeError(f"failed to parse IP: {text!r}") from None


@dataclass(frozen=True)
class LeaderElectionOptions:
    enabled: bool = True
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    namespace: str = "kube-system"
    name: str = "aiokcm"


@dataclass(frozen=True)
class ServingOptions:
    """The secure port's certificate and delegated authentication/authorization, KCM's flags."""

    cert_dir: str = ""
    tls_cert_file: str = ""
    tls_private_key_file: str = ""
    authentication_kubeconfig: str = ""
    authentication_skip_lookup: bool = False
    authentication_tolerate_lookup_failure: bool = False
    authentication_token_webhook_cache_ttl: float = 10.0
    client_ca_file: str = ""
    authorization_kubeconfig: str = ""
    authorization_always_allow_paths: tuple[str, ...] = ("/healthz", "/readyz", "/livez")
    authorization_webhook_cache_authorized_ttl: float = 10.0
    authorization_webhook_cache_unauthorized_ttl: float = 10.0


@dataclass(frozen=True)
class WebhookOptions:
    """The admission webhook port (served when a controller offering a webhook is enabled)."""

    port: int = 9443
    bind_address: str = ""  # empty: --bind-address
    tls_cert_file: str = ""
    tls_private_key_file: str = ""
    namespace: str = "aiokcm-system"
    service: str = "aiokcm-webhook"
    secret: str = "aiokcm-webhook-cert"
    configuration: str = "aiokcm-eviction-surge"
    hosts: tuple[str, ...] = ()
    advertise_address: str = ""  # the leader writes the Service's Endpoints with it; empty: not


@dataclass(frozen=True)
class ManagerOptions:
    kubeconfig: str | None = None
    master: str | None = None
    controllers: tuple[str, ...] = ("*",)
    gates: features.FeatureGate = field(default_factory=features.FeatureGate)
    concurrent_syncs: Mapping[str, int] = field(default_factory=dict)
    kube_api_qps: float = 20.0
    kube_api_burst: int = 30
    leader_election: LeaderElectionOptions = field(default_factory=LeaderElectionOptions)
    bind_address: str = "0.0.0.0"
    secure_port: int = 10257
    serving: ServingOptions = field(default_factory=ServingOptions)
    webhook: WebhookOptions = field(default_factory=WebhookOptions)
    log_format: str = "text"
    verbosity: int = 0
    embedded: bool = False
    embedded_nodes: int = 3
    demo: bool = False
    demo_exit_after_drain: bool = False
    shutdown_grace_period: float = 20.0
    gc_freeze: bool = True
    node_lifecycle: NodeLifecycleConfig = field(default_factory=NodeLifecycleConfig)
    node_maintenance: NodeMaintenanceConfig = field(default_factory=NodeMaintenanceConfig)
    eviction_surge: EvictionSurgeConfig = field(default_factory=EvictionSurgeConfig)
    # No flag: the manager fills its implicit responders from the controllers it runs.
    eviction_request: EvictionRequestConfig = field(default_factory=EvictionRequestConfig)


FlagKind = Literal["duration", "int", "float"]

# Node lifecycle flags: (flag, NodeLifecycleConfig field, kind, help); defaults come from the config.
NODE_LIFECYCLE_FLAGS: tuple[tuple[str, str, FlagKind, str], ...] = (
    ("--node-monitor-grace-period", "node_monitor_grace_period", "duration",
     "How long a Node may go without a heartbeat before it is marked unhealthy."),
    ("--node-monitor-period", "node_monitor_period", "duration",
     "How often the node lifecycle controller checks every Node's heartbeats."),
    ("--node-startup-grace-period", "node_startup_grace_period", "duration",
     "How long a starting Node may be unresponsive before it is marked unhealthy."),
    ("--node-eviction-rate", "node_eviction_rate", "float",
     "Nodes per second whose pods are evicted when a zone is healthy."),
    ("--secondary-node-eviction-rate", "secondary_node_eviction_rate", "float",
     "Nodes per second whose pods are evicted when a zone is unhealthy (0 in small clusters)."),
    ("--large-cluster-size-threshold", "large_cluster_size_threshold", "int",
     "Nodes above which a zone counts as large for the secondary eviction rate."),
    ("--unhealthy-zone-threshold", "unhealthy_zone_threshold", "float",
     "Fraction of NotReady nodes (at least 3) above which a zone is unhealthy."),
)  # fmt: skip


def build_run_parser(registry: ControllerRegistry, *, prog: str = "aiokcm run") -> OneLineParser:
    gates = features.FeatureGate()
    parser = OneLineParser(
        prog=prog,
        allow_abbrev=False,
        description="Run the aiokcm controllers against a Kubernetes API server.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    conn = parser.add_argument_group("connection")
    conn.add_argument(
        "--kubeconfig",
        default=None,
        help="Path to a kubeconfig file (default: $KUBECONFIG, else in-cluster config).",
    )
    conn.add_argument(
        "--master", default=None, help="The address of the API server; overrides the kubeconfig's server."
    )
    conn.add_argument(
        "--kube-api-qps",
        type=_non_negative_float,
        default=20.0,
        help="Client-side queries per second to the API server (token bucket over every call).",
    )
    conn.add_argument(
        "--kube-api-burst",
        type=_positive_int,
        default=30,
        help="Client-side burst of queries to the API server.",
    )
    conn.add_argument(
        "--embedded",
        action="store_true",
        help="Start a local cluster in this process (the aiokcm.embedded plugin) and run against it.",
    )
    conn.add_argument(
        "--embedded-nodes",
        type=_positive_int,
        default=3,
        help="Nodes the embedded local cluster starts with.",
    )
    conn.add_argument(
        "--demo",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="With --embedded: run the narrated demo beside the manager (Deployments scaled up, "
        "then a node drained through a NodeMaintenance without downtime); manager logs "
        "drop to warnings unless -v is given.",
    )
    conn.add_argument(
        "--demo-exit-after-drain",
        action="store_true",
        help="With --embedded: once the demo has drained its node (or failed), stop the manager "
        "as SIGTERM does (for tests and CI).",
    )

    ctl = parser.add_argument_group("controllers")
    ctl.add_argument(
        "--controllers",
        default="*",
        help="Comma-separated controllers to enable. '*' enables every on-by-default controller, "
        "'foo' enables foo, '-foo' disables foo; the first exact match wins. " + registry.help_text(),
    )
    ctl.add_argument(
        "--feature-gates",
        default="",
        help="Comma-separated Name=true|false pairs. Known gates: " + gates.help_text(),
    )
    for d in registry:
        if d.concurrent_syncs_flag:
            # SUPPRESS: an unset flag leaves the controller class's own default in charge.
            ctl.add_argument(
                d.concurrent_syncs_flag,
                type=_positive_int,
                default=argparse.SUPPRESS,
                dest=f"syncs__{d.name}",
                metavar="INT",
                help=f"Objects the {d.name} controller syncs concurrently, its worker count "
                f"(default: {d.default_workers}).",
            )
    ctl.add_argument(
        "--shutdown-grace-period",
        type=parse_duration,
        default="20s",
        help="On SIGTERM, how long in-flight syncs may run before they are cancelled.",
    )
    ctl.add_argument(
        "--gc-freeze",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="Keep Python's cyclic garbage collector off the informer caches (gc.freeze "
        "after each list and every 1000 events): JSON objects form no cycles, and "
        "full collections over a large cache stall the event loop for seconds.",
    )

    node = parser.add_argument_group("node lifecycle")
    lifecycle = NodeLifecycleConfig()
    for flag, dest, kind, text in NODE_LIFECYCLE_FLAGS:
        default = getattr(lifecycle, dest)
        if kind == "duration":
            node.add_argument(
                flag,
                type=parse_duration,
                default=format_duration(default),
                dest=f"node_lifecycle__{dest}",
                metavar="DURATION",
                help=text,
            )
            continue
        node.add_argument(
            flag,
            type=_positive_int if kind == "int" else _non_negative_float,
            default=default,
            dest=f"node_lifecycle__{dest}",
            metavar=kind.upper(),
            help=text,
        )

    nm = parser.add_argument_group("node maintenance")
    nm.add_argument(
        "--node-maintenance-max-unschedulable",
        type=_int_or_percent,
        default=NodeMaintenanceConfig().max_unschedulable,
        dest="node_maintenance_max_unschedulable",
        metavar="INT|PERCENT",
        help="Most nodes (a count, or a percentage of all nodes) that NodeMaintenances may leave "
        "unschedulable at once, counting nodes cordoned by anyone; a maintenance that would go "
        "beyond waits (condition ClusterLimitReached) unless spec.overrideMaxUnschedulable.",
    )

    le = parser.add_argument_group("leader election")
    le.add_argument(
        "--leader-elect",
        type=_bool_flag,
        nargs="?",
        const=True,
        default=True,
        help="Elect a leader on a coordination.k8s.io Lease before running the controllers.",
    )
    le.add_argument(
        "--leader-elect-lease-duration",
        type=parse_duration,
        default="15s",
        help="How long a non-leader waits after the last renewal before taking the lease.",
    )
    le.add_argument(
        "--leader-elect-renew-deadline",
        type=parse_duration,
        default="10s",
        help="How long the leader retries renewing before giving up leadership (and exiting 1).",
    )
    le.add_argument(
        "--leader-elect-retry-period",
        type=parse_duration,
        default="2s",
        help="How long candidates wait between attempts to acquire or renew.",
    )
    le.add_argument(
        "--leader-elect-resource-namespace",
        default="kube-system",
        help="Namespace of the Lease used for leader election.",
    )
    le.add_argument(
        "--leader-elect-resource-name", default="aiokcm", help="Name of the Lease used for leader election."
    )

    srv = parser.add_argument_group("serving")
    srv.add_argument(
        "--bind-address",
        type=_ip_address,
        default="0.0.0.0",
        help="Address to serve /metrics, /healthz, /livez and /readyz on.",
    )
    srv.add_argument(
        "--secure-port",
        type=_port,
        default=10257,
        help="The port on which to serve HTTPS with authentication and authorization "
        "(/metrics, /healthz, /livez, /readyz); 0 disables serving.",
    )
    srv.add_argument(
        "--cert-dir",
        default="",
        help="The directory where the TLS certs are located. If --tls-cert-file and "
        "--tls-private-key-file are provided, this flag is ignored. Empty: a self-signed "
        "certificate is generated in memory.",
    )
    srv.add_argument(
        "--tls-cert-file",
        default="",
        help="File containing the default x509 certificate for HTTPS (CA cert, if any, "
        "concatenated after server cert).",
    )
    srv.add_argument(
        "--tls-private-key-file",
        default="",
        help="File containing the default x509 private key matching --tls-cert-file.",
    )

    hook = parser.add_argument_group("admission webhook (eviction-surge)")
    surge = EvictionSurgeConfig()
    hook.add_argument(
        "--webhook-port",
        type=_port,
        default=9443,
        help="HTTPS port of the admission webhooks the API server calls (the eviction-surge "
        "controller's); 0 disables it.",
    )
    hook.add_argument(
        "--webhook-bind-address",
        type=_ip_address,
        default=None,
        help="Address to serve the admission webhooks on (default: --bind-address).",
    )
    hook.add_argument(
        "--webhook-tls-cert-file",
        default="",
        help="Serving certificate of the webhooks (e.g. a cert-manager Certificate's Secret, "
        "mounted), reloaded when it changes; the caBundle is then not managed by aiokcm. "
        "Empty: aiokcm generates the pair, keeps it in --webhook-cert-secret, rotates it "
        "before expiry and patches the caBundle into --webhook-configuration.",
    )
    hook.add_argument(
        "--webhook-tls-private-key-file", default="", help="Private key matching --webhook-tls-cert-file."
    )
    hook.add_argument(
        "--webhook-namespace",
        default="aiokcm-system",
        help="Namespace of the webhook's Service and certificate Secret.",
    )
    hook.add_argument(
        "--webhook-service",
        default="aiokcm-webhook",
        help="Service the API server reaches the webhooks through (names in the certificate).",
    )
    hook.add_argument(
        "--webhook-cert-secret",
        default="aiokcm-webhook-cert",
        help="Secret holding the generated webhook certificate.",
    )
    hook.add_argument(
        "--webhook-configuration",
        default="aiokcm-eviction-surge",
        help="ValidatingWebhookConfiguration whose caBundle aiokcm keeps current.",
    )
    hook.add_argument(
        "--webhook-hosts",
        default="",
        help="Comma-separated extra DNS names or IPs for the generated certificate (for a clientConfig.url).",
    )
    hook.add_argument(
        "--webhook-advertise-address",
        type=_ip_address,
        default=None,
        help="This replica's address (the pod IP): the leader writes it into the Endpoints of "
        "--webhook-service (a Service without selector), so the API server reaches the "
        "leader only. Empty: the Service's own selector decides.",
    )
    hook.add_argument(
        "--eviction-surge-timeout",
        type=parse_duration,
        default=format_duration(surge.surge_timeout),
        dest="eviction_surge_timeout",
        metavar="DURATION",
        help="How long an eviction is held back waiting for a replacement; after it, the "
        "PodDisruptionBudget decides alone.",
    )
    hook.add_argument(
        "--eviction-surge-retry-window",
        type=parse_duration,
        default=format_duration(surge.retry_window),
        dest="eviction_surge_retry_window",
        metavar="DURATION",
        help="An evacuation asked for by the webhook is withdrawn when no eviction of the "
        "pod is retried within this window.",
    )
    hook.add_argument(
        "--eviction-surge-requests",
        choices=REQUEST_MODES,
        default=surge.requests,
        dest="eviction_surge_requests",
        help="How the webhook asks for a replacement of a pod whose eviction it holds back: the "
        "pod's EvacuationRequest condition, or an EvictionRequest (requester "
        "eviction-surge.aiokcm.io/webhook) for the pod's eviction responders, named in the "
        "denial; EvictionRequest needs the EvictionRequestAPI feature gate.",
    )

    authn = parser.add_argument_group("authentication")
    authn.add_argument(
        "--authentication-kubeconfig",
        default="",
        help="kubeconfig file pointing at the 'core' kubernetes server with enough rights to "
        "create tokenreviews.authentication.k8s.io. Empty: the in-cluster service account; "
        "outside a cluster, bearer tokens are then ignored.",
    )
    authn.add_argument(
        "--authentication-skip-lookup",
        type=_bool_flag,
        nargs="?",
        const=True,
        default=False,
        help="If false, the authentication-kubeconfig will be used to lookup missing "
        "authentication configuration (the client CA) from the cluster.",
    )
    authn.add_argument(
        "--authentication-tolerate-lookup-failure",
        type=_bool_flag,
        nargs="?",
        const=True,
        default=False,
        help="If true, failures to look up missing authentication configuration from the "
        "cluster are not considered fatal.",
    )
    authn.add_argument(
        "--authentication-token-webhook-cache-ttl",
        type=parse_duration,
        default="10s",
        help="The duration to cache responses from the webhook token authenticator.",
    )
    authn.add_argument(
        "--client-ca-file",
        default="",
        help="If set, any request presenting a client certificate signed by one of the "
        "authorities in the client-ca-file is authenticated with the CommonName of the "
        "client certificate.",
    )

    authz = parser.add_argument_group("authorization")
    authz.add_argument(
        "--authorization-kubeconfig",
        default="",
        help="kubeconfig file pointing at the 'core' kubernetes server with enough rights to "
        "create subjectaccessreviews.authorization.k8s.io. Empty: the in-cluster service "
        "account; outside a cluster only --authorization-always-allow-paths are served.",
    )
    authz.add_argument(
        "--authorization-always-allow-paths",
        default="/healthz,/readyz,/livez",
        help="A list of HTTP paths to skip during authorization, i.e. these are authorized "
        "without contacting the 'core' kubernetes server.",
    )
    authz.add_argument(
        "--authorization-webhook-cache-authorized-ttl",
        type=parse_duration,
        default="10s",
        help="The duration to cache 'authorized' responses from the webhook authorizer.",
    )
    authz.add_argument(
        "--authorization-webhook-cache-unauthorized-ttl",
        type=parse_duration,
        default="10s",
        help="The duration to cache 'unauthorized' responses from the webhook authorizer.",
    )

    log = parser.add_argument_group("logging")
    log.add_argument("--log-format", choices=("json", "text"), default="text", help="Log line format.")
    log.add_argument(
        "-v",
        "--v",
        type=_positive_int,
        default=0,
        dest="verbosity",
        help="Log verbosity: 0-3 info, 4 and above debug (klog's levels).",
    )
    return parser


def _bool_flag(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in {"true", "1", "t", "yes"}:
        return True
    if lowered in {"false", "0", "f", "no"}:
        return False
    raise argparse.ArgumentTypeError(f"invalid boolean {text!r} (true or false)")


def parse_run_args(argv: Sequence[str], registry: ControllerRegistry) -> ManagerOptions:
    """Parse and validate; raise `UsageError` with one line for any bad input."""
    parser = build_run_parser(registry)
    ns = parser.parse_args(list(argv))
    gates = features.FeatureGate()
    if ns.embedded:
        # The embedded cluster exists to show declarative node maintenance: its gates default on
        # there (an explicit --feature-gates value still wins).
        gates.set_from_map(
            {
                features.DECLARATIVE_NODE_MAINTENANCE: True,
                features.NODE_MAINTENANCE_DEPLOYMENT: True,
                features.NODE_MAINTENANCE_LEASE: True,
                features.EVICTION_SURGE: True,
            }
        )
    try:
        gates.set_from_string(ns.feature_gates)
    except ValueError as exc:
        raise UsageError(f"{parser.prog}: --feature-gates: {exc}") from None
    if ns.eviction_surge_requests == REQUESTS_EVICTION_REQUEST and not gates.enabled(
        features.EVICTION_REQUEST_API
    ):
        raise UsageError(
            f"{parser.prog}: --eviction-surge-requests={REQUESTS_EVICTION_REQUEST} needs the "
            f"{features.EVICTION_REQUEST_API} feature gate (--feature-gates={features.EVICTION_REQUEST_API}=true)"
        )
    entries = [e for e in ns.controllers.split(",") if e.strip()]
    try:
        controllers = tuple(registry.resolve_controllers_flag(entries))
    except ValueError as exc:
        raise UsageError(f"{parser.prog}: --controllers: {exc}") from None
    election = LeaderElectionOptions(
        enabled=ns.leader_elect,
        lease_duration=ns.leader_elect_lease_duration,
        renew_deadline=ns.leader_elect_renew_deadline,
        retry_period=ns.leader_elect_retry_period,
        namespace=ns.leader_elect_resource_namespace,
        name=ns.leader_elect_resource_name,
    )
    _validate_election(parser.prog, election)
    values = vars(ns)
    syncs = {key.removeprefix("syncs__"): int(v) for key, v in values.items() if key.startswith("syncs__")}
    lifecycle = NodeLifecycleConfig(
        **{f.name: values[f"node_lifecycle__{f.name}"] for f in fields(NodeLifecycleConfig)}
    )
    threshold = lifecycle.unhealthy_zone_threshold
    if not 0 < threshold <= 1:
        raise UsageError(f"{parser.prog}: --unhealthy-zone-threshold must be in (0, 1], got {threshold}")
    return ManagerOptions(
        kubeconfig=ns.kubeconfig,
        master=ns.master,
        controllers=controllers,
        gates=gates,
        concurrent_syncs={name: max(1, count) for name, count in syncs.items()},
        kube_api_qps=ns.kube_api_qps,
        kube_api_burst=max(1, ns.kube_api_burst),
        leader_election=election,
        bind_address=ns.bind_address,
        secure_port=ns.secure_port,
        serving=_serving_options(parser.prog, ns),
        webhook=_webhook_options(parser.prog, ns),
        log_format=ns.log_format,
        verbosity=ns.verbosity,
        embedded=ns.embedded,
        embedded_nodes=ns.embedded_nodes,
        demo=ns.embedded and ns.demo,
        demo_exit_after_drain=ns.embedded and ns.demo and ns.demo_exit_after_drain,
        shutdown_grace_period=ns.shutdown_grace_period,
        gc_freeze=ns.gc_freeze,
        node_lifecycle=lifecycle,
        node_maintenance=NodeMaintenanceConfig(max_unschedulable=ns.node_maintenance_max_unschedulable),
        eviction_surge=EvictionSurgeConfig(
            surge_timeout=ns.eviction_surge_timeout,
            retry_window=ns.eviction_surge_retry_window,
            requests=ns.eviction_surge_requests,
        ),
    )


def _serving_options(prog: str, ns: argparse.Namespace) -> ServingOptions:
    if ns.secure_port > 65535:
        raise UsageError(f"{prog}: --secure-port {ns.secure_port} must be between 0 and 65535, inclusive")
    paths = tuple(p.strip() for p in ns.authorization_always_allow_paths.split(",") if p.strip())
    for path in paths:
        if "*" in path.removeprefix("/")[:-1]:
            raise UsageError(
                f"{prog}: --authorization-always-allow-paths: only a trailing * is allowed in {path!r}"
            )
    if bool(ns.tls_cert_file) != bool(ns.tls_private_key_file):
        raise UsageError(f"{prog}: --tls-cert-file and --tls-private-key-file must be given together")
    for flag in (
        "authentication_token_webhook_cache_ttl",
        "authorization_webhook_cache_authorized_ttl",
        "authorization_webhook_cache_unauthorized_ttl",
    ):
        if getattr(ns, flag) < 0:
            raise UsageError(f"{prog}: --{flag.replace('_', '-')} must not be negative")
    return ServingOptions(
        cert_dir=ns.cert_dir,
        tls_cert_file=ns.tls_cert_file,
        tls_private_key_file=ns.tls_private_key_file,
        authentication_kubeconfig=ns.authentication_kubeconfig,
        authentication_skip_lookup=ns.authentication_skip_lookup,
        authentication_tolerate_lookup_failure=ns.authentication_tolerate_lookup_failure,
        authentication_token_webhook_cache_ttl=ns.authentication_token_webhook_cache_ttl,
        client_ca_file=ns.client_ca_file,
        authorization_kubeconfig=ns.authorization_kubeconfig,
        authorization_always_allow_paths=paths,
        authorization_webhook_cache_authorized_ttl=ns.authorization_webhook_cache_authorized_ttl,
        authorization_webhook_cache_unauthorized_ttl=ns.authorization_webhook_cache_unauthorized_ttl,
    )


def _webhook_options(prog: str, ns: argparse.Namespace) -> WebhookOptions:
    if bool(ns.webhook_tls_cert_file) != bool(ns.webhook_tls_private_key_file):
        raise UsageError(
            f"{prog}: --webhook-tls-cert-file and --webhook-tls-private-key-file must be given together"
        )
    for flag in ("webhook_namespace", "webhook_service", "webhook_cert_secret", "webhook_configuration"):
        if not getattr(ns, flag).strip():
            raise UsageError(f"{prog}: --{flag.replace('_', '-')} must not be empty")
    for flag in ("eviction_surge_timeout", "eviction_surge_retry_window"):
        if getattr(ns, flag) <= 0:
            raise UsageError(f"{prog}: --{flag.replace('_', '-')} must be positive")
    return WebhookOptions(
        port=ns.webhook_port,
        bind_address=ns.webhook_bind_address or "",
        tls_cert_file=ns.webhook_tls_cert_file,
        tls_private_key_file=ns.webhook_tls_private_key_file,
        namespace=ns.webhook_namespace.strip(),
        service=ns.webhook_service.strip(),
        secret=ns.webhook_cert_secret.strip(),
        configuration=ns.webhook_configuration.strip(),
        hosts=tuple(h.strip() for h in ns.webhook_hosts.split(",") if h.strip()),
        advertise_address=ns.webhook_advertise_address or "",
    )


def _validate_election(prog: str, le: LeaderElectionOptions) -> None:
    """client-go's NewLeaderElector checks, so a bad combination fails at start, not after an hour."""
    if not le.enabled:
        return
    if le.lease_duration <= le.renew_deadline:
        raise UsageError(
            f"{prog}: --leader-elect-lease-duration must be greater than --leader-elect-renew-deadline"
        )
    if le.renew_deadline <= JITTER_FACTOR * le.retry_period:
        raise UsageError(
            f"{prog}: --leader-elect-renew-deadline must be greater than "
            f"{JITTER_FACTOR} x --leader-elect-retry-period"
        )
    if le.retry_period <= 0:
        raise UsageError(f"{prog}: --leader-elect-retry-period must be positive")
    if not le.name or not le.namespace:
        raise UsageError(f"{prog}: --leader-elect-resource-name and -namespace must not be empty")
