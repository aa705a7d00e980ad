"""Joining a Ray cluster, or starting a local one on loopback; the one place that imports ray."""

from __future__ import annotations

import os
from typing import Any

from cafe.errors import CafeError

#: named actors of cafe (server replicas) live here, so any driver can find them
NAMESPACE = "cafe"
LOCAL = "local"
#: Ray's switch for multi-node clusters; "0" keeps every address on 127.0.0.1
LOOPBACK_ONLY = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


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


def connect(address: str | None = None, num_cpus: int | None = None) -> Any:
    """The ray module, joined to the cluster at ``address`` ("auto": the one RAY_ADDRESS or
    this machine's `ray start` names), or to a new local cluster bound to 127.0.0.1 (None or
    "local"; it ends with this process). A driver already joined (a test's cluster) stays."""
    local = address in (None, LOCAL)
    if local:
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
                _node_ip_address="127.0.0.1", include_dashboard=False, num_cpus=num_cpus,
                namespace=NAMESPACE, **quiet,
            )  # fmt: skip
        except Exception as e:
            raise ClusterError(f"cannot start a local Ray cluster: {_first(e)}") from None
        return ray
    try:
        ray.init(address=address, namespace=NAMESPACE, **quiet)
    except Exception as e:  # ConnectionError, or Ray's own when nothing listens there
        raise ClusterError(
            f"cannot join the Ray cluster at {address}: {_first(e)} (start it with `ray start "
            "--head`, or leave --ray out for a local cluster)"
        ) from None
    return ray


def _first(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]
