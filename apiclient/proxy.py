"""The HTTP proxy for the API server, chosen once when the client is built, as client-go does.

client-go's transport uses Go's `http.ProxyFromEnvironment`: `HTTPS_PROXY` / `HTTP_PROXY` /
`NO_PROXY`, read once per process, with `localhost` and loopback addresses never proxied; a
kubeconfig's `proxy-url` replaces it. aiohttp's `trust_env=True` would read the same variables,
but it also looks up `~/.netrc` for every request, in the default thread pool: a thread hop and a
file read per API call, which at 20 requests/s per controller is pure overhead on the shared loop
(and client-go never reads netrc). So the session runs with `trust_env=False` and the proxy
found here is set on the configuration, where kubernetes_asyncio passes it to every request.
"""

from __future__ import annotations

import ipaddress

from aiohttp.helpers import get_env_proxy_for_url
from yarl import URL


def proxy_from_environment(server: str) -> str | None:
    """The proxy URL the environment names for `server`, or None (direct)."""
    url = URL(server)
    host = url.host
    if not host or host == "localhost" or _is_loopback(host):
        return None
    try:
        proxy, auth = get_env_proxy_for_url(url)
    except LookupError:
        return None
    if auth is not None:
        proxy = proxy.with_user(auth.login).with_password(auth.password)
    return str(proxy)


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
