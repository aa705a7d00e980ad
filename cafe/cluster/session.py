"""Joining a Ray cluster, or starting a local one on loopback; the one place that imports ray."""

from __future__ import annotations

import ipaddress
import os
import socket
from typing import Any

from cafe.errors import CafeError

#: named actors of cafe (server replicas) live here, so any driver can find them
NAMESPACE = "cafe"
LOCAL = "local"
#: Ray's switch for multi-node clusters; "0" keeps every address on 127.0.0.1
LOOPBACK_ONLY = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
#: the runtime env of an actor that does the user's work (a model server, an adapter's
#: replica): Ray nices every worker by 15 (its ``worker_niceness``) so that Ray's own daemons
#: and the node's other processes come first; a model at nice 15 gets ~3 % of a core beside
#: any busy process and its callers time out. At 0 it runs at the priority of whoever started
#: the node, as Ray's own job manager runs a job's driver.
AT_NODE_PRIORITY = {"env_vars": {"RAY_worker_niceness": "0"}}


class ClusterError(CafeError, ValueError):
    """Ray is missing, a cluster cannot be joined, or replicas never came up: one line."""


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ClusterError(
            'Ray is not installed: pip install -e ".[ray]" (from a checkout; or pip install '
            '"cafe-audio-eval[ray]")'
        ) from None
    return ray


#: seconds to wait for a named cluster's address to accept a connection before saying so
PROBE_S = 5.0


def connect(address: str | None = None, num_cpus: int | None = None) -> Any:
    """The ray module, joined to the cluster at ``address`` ("auto": the one RAY_ADDRESS or
    this machine's `ray start` names), or to a new local cluster bound to 127.0.0.1 (None or
    "local"; it ends with this process, and never joins a cluster RAY_ADDRESS or a `ray start`
    on this machine names: a user's run stays out of someone else's job). A driver already
    joined (a test's cluster) stays."""
    local = address in (None, LOCAL)
    host = None if local else _host_of(str(address))
    loopback = local or _is_loopback(host)
    if loopback:
        # Ray takes the address of the default route for a node even when told 127.0.0.1, and
        # its GCS is then unreachable on machines whose outside interface is firewalled; this
        # switch (read when ray is imported) keeps every process of a one-machine cluster on
        # loopback, children included
        os.environ.setdefault(LOOPBACK_ONLY, "0")
    ray = import_ray()
    if ray.is_initialized():
        return ray
    quiet = {"log_to_driver": False, "configure_logging": False}
    if local:
        try:
            ray.init(
                address=LOCAL, _node_ip_address="127.0.0.1", include_dashboard=False,
                num_cpus=num_cpus, namespace=NAMESPACE, **quiet,
            )  # fmt: skip
        except Exception as e:
            raise ClusterError(f"cannot start a local Ray cluster: {_first(e)}") from None
        return ray
    if host is not None:  # nothing listening there: one line now, not minutes of Ray's retries
        _probe(str(address), host)
    # a cluster on loopback is joined from loopback, not from this machine's outside interface
    node = {"_node_ip_address": "127.0.0.1"} if loopback else {}
    try:
        ray.init(address=address, namespace=NAMESPACE, **node, **quiet)
    except Exception as e:  # ConnectionError, or Ray's own when nothing listens there
        raise ClusterError(
            f"cannot join the Ray cluster at {address}: {_first(e)} (start it with `ray start "
            "--head`, or leave --ray out for a local cluster)"
        ) from None
    return ray


def _host_of(address: str) -> str | None:
    """The host of a ``host:port`` address; None for "auto" and Ray-client URLs (ray://)."""
    if "://" in address or ":" not in address:
        return None
    return address.rsplit(":", 1)[0].strip("[]") or None


def _is_loopback(host: str | None) -> bool:
    if host is None:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _probe(address: str, host: str) -> None:
    """One TCP connection to the cluster's GCS port, answered within PROBE_S or refused."""
    port = address.rsplit(":", 1)[1]
    try:
        with socket.create_connection((host, int(port)), timeout=PROBE_S):
            return
    except ValueError:
        why = f"port {port!r} is not a number"
    except OSError as e:
        why = e.strerror or type(e).__name__
    raise ClusterError(
        f"cannot join the Ray cluster at {address}: {why} (is `ray start --head` running "
        "there? leave --ray out for a local cluster)"
    )


def _first(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]
