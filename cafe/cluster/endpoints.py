"""Where a served model's replicas answer: the endpoint file `cafe serve` writes, or the
replicas a Ray cluster holds. Every chat client takes ``--endpoint @FILE`` and
``--endpoint ray:ADDRESS`` beside plain URLs (``expand``), so `cafe run`, `cafe judge` and
every judging step spread their calls over the replicas with the one multi-endpoint client
(least loaded, a limiter and a breaker each: a replica that dies is dropped, its calls go to
the others). Reading a file imports no Ray."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cafe.errors import CafeError, ConfigError

FILE_PREFIX = "@"
RAY_PREFIX = "ray:"
#: the prefix of the named actors `cafe serve` places (cafe.cluster.replicas)
ACTOR_PREFIX = "cafe-serve:"


@dataclass
class EndpointList:
    """What `cafe serve` writes: the served model's name and its replicas' base URLs."""

    served_model: str
    endpoints: list[str]
    engine: str = ""
    cluster: str | None = None  # the Ray address the replicas live in
    replicas: list[dict[str, Any]] = field(default_factory=list)  # node, pid, log per replica
    #: the weights the replicas serve (cafe.cluster.servers.weights_identity); "" unknown
    checkpoint: str = ""


class ReplicaMismatch(CafeError, ValueError):
    """Endpoints declared copies of one model report different models."""


def is_replica_spec(value: str) -> bool:
    """Whether an --endpoint value names replicas (a serve file or a cluster), not one URL."""
    return value.startswith((FILE_PREFIX, RAY_PREFIX))


def expand(values: Sequence[str | None]) -> list[str | None]:
    """The URLs behind ``values``: ``@FILE`` the endpoints in the file, ``ray:ADDRESS`` those
    of the replicas alive in that cluster (``ray:`` alone: RAY_ADDRESS, else this machine's),
    anything else as it is. No replica found is one line saying where it looked."""
    out: list[str | None] = []
    for v in values:
        if not isinstance(v, str) or not is_replica_spec(v):
            out.append(v)
        elif v.startswith(FILE_PREFIX):
            out.extend(read(Path(v[len(FILE_PREFIX) :])).endpoints)
        else:
            out.extend(
                from_cluster(v[len(RAY_PREFIX) :] or os.environ.get("RAY_ADDRESS") or "auto")
            )
    return list(dict.fromkeys(out))  # one endpoint (its limiter, its breaker) per URL


def live_elsewhere(path: Path, timeout_s: float = 3.0) -> list[str]:
    """The URLs of the endpoint file at ``path`` that answer GET /models now: a `cafe serve`
    still keeps that file ([] where there is no readable file, or nothing there answers)."""
    import httpx

    try:
        urls = read(path).endpoints
    except ConfigError:
        return []
    alive = []
    for url in urls[:64]:
        try:
            if httpx.get(f"{url.rstrip('/')}/models", timeout=timeout_s).status_code < 500:
                alive.append(url)
        except (httpx.HTTPError, ValueError):
            continue
    return alive


def remove_if_ours(path: Path, listing: EndpointList | None) -> None:
    """Remove the endpoint file only while it holds ``listing`` (what this serve last wrote):
    one another serve has since written is theirs."""
    try:
        ours = listing is not None and json.loads(path.read_text()) == asdict(listing)
    except (OSError, ValueError, RecursionError):
        return
    if ours:
        path.unlink(missing_ok=True)


def recorded(values: Sequence[str | None]) -> dict[str, dict[str, str]]:
    """Per URL, what the endpoint file naming it records about the weights served there (the
    checkpoint's identity): part of the served model's identity, as GET /models is; URLs
    given plainly, or by a file that records none, have none."""
    out: dict[str, dict[str, str]] = {}
    for v in values:
        if isinstance(v, str) and v.startswith(FILE_PREFIX):
            listing = read(Path(v[len(FILE_PREFIX) :]))
            if isinstance(listing.checkpoint, str) and listing.checkpoint:
                out.update(dict.fromkeys(listing.endpoints, {"checkpoint": listing.checkpoint}))
    return out


def write(path: Path, listing: EndpointList) -> None:
    """The endpoint file, whole or not at all (a reader never sees half a list)."""
    from cafe.store import write_json_atomic

    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, asdict(listing))


def read(path: Path) -> EndpointList:
    """An endpoint file: `cafe serve`'s JSON, or plain text with one URL a line (# comments)."""
    from cafe.store import read_regular  # a FIFO or device there: one line, not a hang

    try:
        text = read_regular(path).decode("utf-8", errors="replace")
    except OSError as e:
        raise ConfigError(
            f"{path}: cannot read the endpoint file ({e.strerror or e}); start "
            "the replicas with `cafe serve --endpoints-file PATH`"
        ) from None
    if text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
            listing = EndpointList(**data)
        except (ValueError, TypeError) as e:
            raise ConfigError(f"{path}: not an endpoint file of `cafe serve` ({e})") from None
        except RecursionError:  # JSON nested deeper than the parser's stack
            raise ConfigError(f"{path}: not an endpoint file of `cafe serve` (nested too "
                              "deep)") from None  # fmt: skip
    else:
        urls = [s.strip() for s in text.splitlines() if s.strip() and not s.startswith("#")]
        listing = EndpointList(served_model="", endpoints=urls)
    ok = isinstance(listing.endpoints, list) and all(isinstance(u, str) for u in listing.endpoints)
    if not ok or not listing.endpoints:
        raise ConfigError(f"{path}: field endpoints: no replica is listed (all stopped?)")
    listing.endpoints = list(dict.fromkeys(listing.endpoints))  # a URL listed twice is one
    return listing


def from_cluster(address: str) -> list[str]:
    """The URLs of the `cafe serve` replicas alive in the cluster at ``address``."""
    from cafe.cluster.session import NAMESPACE, ClusterError, connect

    ray = connect(address)
    urls = []
    for entry in ray.util.list_named_actors(all_namespaces=True):
        if entry["namespace"] != NAMESPACE or not entry["name"].startswith(ACTOR_PREFIX):
            continue
        try:
            actor = ray.get_actor(entry["name"], namespace=NAMESPACE)
            url = ray.get(actor.url.remote(), timeout=10)
        except Exception:  # died or stopping between the listing and the question
            continue
        if url:
            urls.append(url)
    if not urls:
        raise ClusterError(f"the Ray cluster at {address} holds no `cafe serve` replica")
    return sorted(urls)


def check_same_model(reports: Sequence[dict[str, Any] | None], endpoints: Sequence[str]) -> None:
    """Replicas must serve one model: what each endpoint reports (GET /models) must agree,
    else one line naming the endpoints that differ."""
    seen: dict[str, list[str]] = {}
    for url, r in zip(endpoints, reports, strict=True):
        seen.setdefault(json.dumps(r, sort_keys=True), []).append(url)
    if len(seen) > 1:
        shown = "; ".join(f"{', '.join(urls)} report {k}" for k, urls in seen.items())
        raise ReplicaMismatch(
            f"the replicas serve different models ({shown}): serve one model on every replica, "
            "or name the servers apart (separate runs)"
        )
