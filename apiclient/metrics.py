"""client-go's REST client metrics, byte for byte, so existing dashboards work unchanged."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

REQUESTS_TOTAL = Counter(
    "rest_client_requests_total",
    "Number of HTTP requests, partitioned by status code, method, and host.",
    ["code", "method", "host"],
)
REQUEST_DURATION = Histogram(
    "rest_client_request_duration_seconds",
    "Request latency in seconds. Broken down by verb, and host.",
    ["verb", "host"],
    buckets=(0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0),
)
RATE_LIMITER_DURATION = Histogram(
    "rest_client_rate_limiter_duration_seconds",
    "Client side rate limiter latency in seconds. Broken down by verb, and host.",
    ["verb", "host"],
    buckets=(0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0),
)
EXEC_PLUGIN_CALLS = Counter(
    "rest_client_exec_plugin_call_total",
    "Number of calls to an exec plugin, partitioned by the type of event encountered (no_error, "
    "plugin_execution_error, plugin_not_found_error, client_internal_error) and an optional exit code. "
    "The exit code will be set to 0 if and only if the plugin call was successful.",
    ["code", "call_status"],
)
