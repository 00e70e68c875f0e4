"""TLS for the API connection, built from bytes held in memory: no key file is ever left on disk.

Python's `ssl` loads a client certificate and key only from paths. kubernetes_asyncio writes
inline `client-key-data` to a temporary file and removes it at exit, so a killed process leaves
the private key in `$TMPDIR`. Here the bytes go into an anonymous memory file (`memfd_create`,
opened through `/proc/self/fd/N`): nothing is written to any filesystem, and the descriptor is
closed as soon as OpenSSL has read it. Where memfd is missing, a file in a fresh private
directory is created and removed within the same synchronous call, with no await between.
CA data needs no file at all (`cadata`).
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import ssl
import tempfile
from collections.abc import Iterator

import aiohttp

READ_BUFSIZE = 2**21  # as kubernetes_asyncio's session: one watch event may be a large object


@contextlib.contextmanager
def memory_paths(*contents: bytes) -> Iterator[list[str]]:
    """Paths whose content is `contents`, valid only inside the block."""
    fds: list[int] = []
    folder: str | None = None
    try:
        if hasattr(os, "memfd_create") and os.path.isdir("/proc/self/fd"):
            paths = []
            for data in contents:
                fd = os.memfd_create("aiokcm-tls", os.MFD_CLOEXEC)
                fds.append(fd)
                os.write(fd, data)
                paths.append(f"/proc/self/fd/{fd}")
            yield paths
        else:
            folder = tempfile.mkdtemp(prefix="aiokcm-tls-")
            paths = []
            for i, data in enumerate(contents):
                path = os.path.join(folder, str(i))
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                paths.append(path)
            yield paths
    finally:
        for fd in fds:
            os.close(fd)
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


def load_client_certificate(context: ssl.SSLContext, cert: bytes, key: bytes) -> None:
    with memory_paths(cert, key) as (cert_path, key_path):
        try:
            context.load_cert_chain(cert_path, key_path)
        except ssl.SSLError as exc:
            raise ValueError(f"failed parsing client key/certificate: {exc.reason or exc}") from None


@functools.cache
def _system_roots() -> ssl.SSLContext:
    """The system's trust store, parsed once per process (about 27 ms of CPU) and shared by every
    client that adds nothing to it: a context is never changed once a session holds it."""
    return ssl.create_default_context()


def ssl_context(*, ca: bytes | None, cert: bytes | None, key: bytes | None, verify: bool) -> ssl.SSLContext:
    """What kubernetes_asyncio's REST client builds, from memory instead of file names; no trust
    store is loaded where nothing is verified."""
    if not verify:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        if cert and key:
            load_client_certificate(context, cert, key)
        return context
    if not ca and not (cert and key):
        return _system_roots()
    if ca:
        try:
            context = ssl.create_default_context(cadata=ca.decode("ascii", "replace"))
        except ssl.SSLError as exc:
            raise ValueError(f"unable to load root certificates: {exc.reason or exc}") from None
    else:
        context = ssl.create_default_context()
    if cert and key:
        load_client_certificate(context, cert, key)
    return context


def session(context: ssl.SSLContext, *, limit: int) -> aiohttp.ClientSession:
    """An aiohttp session as kubernetes_asyncio's `RESTClientObject` makes one, on `context`, but
    without `trust_env`: the proxy comes from `apiclient.proxy`, and no request waits on a thread."""
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=limit, ssl=context), trust_env=False, read_bufsize=READ_BUFSIZE
    )
