"""K replicas of a model server, each a Ray actor that runs the server process on the node it
was placed on (with the GPUs and CPUs its card asks for), found again by name from any driver
(cafe.cluster.endpoints.from_cluster). The server process dies with its actor (Linux's parent
death signal), so a killed actor, a removed node or a killed `cafe serve` leaves no server."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cafe.cluster.endpoints import ACTOR_PREFIX, EndpointList
from cafe.cluster.servers import ServerCommand
from cafe.cluster.session import AT_NODE_PRIORITY, NAMESPACE, ClusterError, connect
from cafe.store import judge_slug

#: how often a waiting driver asks a starting server for its model list
POLL_S = 0.5


def _die_with_parent() -> None:  # runs in the child between fork and exec
    import ctypes

    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def log_path(log_dir: Path, served_model: str, tag: str, index: int) -> Path:
    """Replica ``index``'s server log: the model's name as a file name ("org/model", or one
    holding "..", stays inside ``log_dir``)."""
    return log_dir / f"{judge_slug(served_model)}-{tag}-{index}.log"


def free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class ServerReplica:
    """The actor: one server process, its URL and its log on this node."""

    def __init__(self, command: ServerCommand, host: str | None, log: str):
        self.command, self.host, self.log = command, host, log
        self.proc: subprocess.Popen[bytes] | None = None
        self.base: str | None = None

    def start(self) -> dict[str, Any]:
        import ray

        host = self.host or ray.util.get_node_ip_address()
        port = free_port(host)
        Path(self.log).parent.mkdir(parents=True, exist_ok=True)
        from cafe.safe_files import open_no_follow  # a link planted in the log folder: refused

        fd = open_no_follow(self.log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        with os.fdopen(fd, "wb") as f:
            self.proc = subprocess.Popen(
                self.command.for_address(host, port), stdout=f, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent,
            )  # fmt: skip
        self.base = f"http://{host}:{port}/v1"
        node = ray.get_runtime_context().get_node_id()
        return {"url": self.base, "pid": self.proc.pid, "node": node, "log": self.log}

    def url(self) -> str | None:
        """The base URL while the server process lives."""
        return self.base if self.proc is not None and self.proc.poll() is None else None

    def exit_code(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def log_tail(self, chars: int = 2000) -> str:
        try:  # the end of the file only: a server's log may be large
            with open(self.log, "rb") as f:
                f.seek(max(0, f.seek(0, os.SEEK_END) - 4 * chars))
                return f.read().decode("utf-8", errors="replace")[-chars:]
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@dataclass
class Replica:
    actor: Any
    url: str
    info: dict[str, Any]


class Replicas:
    """Start ``count`` replicas of ``command`` (``start``), know which still answer
    (``alive``), stop them all (``stop``, or leaving the ``with`` block)."""

    def __init__(
        self, command: ServerCommand, count: int, *, address: str | None = None,
        host: str | None = None, log_dir: str | Path | None = None,
        ready_timeout_s: float = 600.0,
    ):  # fmt: skip
        if count < 1:
            raise ClusterError(f"--replicas {count}: serve at least one replica")
        self.command, self.count, self.address = command, count, address
        # on a local cluster every server listens on loopback; on a real one, on its node's IP
        self.host = host or ("127.0.0.1" if address in (None, "local") else None)
        self.log_dir = Path(log_dir or Path(tempfile.gettempdir()) / "cafe-serve")
        self.ready_timeout_s = ready_timeout_s
        self.replicas: list[Replica] = []
        self.tag = uuid.uuid4().hex[:8]

    def __enter__(self) -> Replicas:
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def start(self) -> EndpointList:
        ray = connect(self.address)
        cls = ray.remote(ServerReplica)
        cmd = self.command
        actors = []
        for i in range(self.count):
            name = f"{ACTOR_PREFIX}{cmd.served_model}:{self.tag}:{i}"
            log = str(log_path(self.log_dir, cmd.served_model, self.tag, i))
            actors.append(cls.options(
                name=name, namespace=NAMESPACE, num_cpus=cmd.cpus, num_gpus=cmd.gpus,
                scheduling_strategy="SPREAD", max_concurrency=4, runtime_env=AT_NODE_PRIORITY,
            ).remote(cmd, self.host, log))  # fmt: skip
        try:
            infos = self._placed(ray, actors)
            self.replicas = [Replica(a, i["url"], i) for a, i in zip(actors, infos, strict=True)]
            self._wait_healthy(ray)
        except BaseException:
            self.replicas = [Replica(a, "", {}) for a in actors]
            self.stop()
            raise
        return self.listing()

    def _placed(self, ray: Any, actors: list[Any]) -> list[dict[str, Any]]:
        try:
            return ray.get([a.start.remote() for a in actors], timeout=self.ready_timeout_s)
        except (ray.exceptions.RayActorError, ray.exceptions.NodeDiedError) as e:
            first = (str(e).strip().splitlines() or [type(e).__name__])[0]
            raise ClusterError(
                f"a replica of {self.command.served_model} died while it was being placed "
                f"({first}); `ray status` shows the cluster's nodes"
            ) from None
        except ray.exceptions.GetTimeoutError:
            cmd = self.command
            raise ClusterError(
                f"{self.count} replica(s) of {cmd.served_model} were not all placed within "
                f"{self.ready_timeout_s:g} s: each asks for {cmd.gpus:g} GPU(s) and "
                f"{cmd.cpus:g} CPU(s) (`ray status` shows what the cluster has)"
            ) from None

    def _wait_healthy(self, ray: Any) -> None:
        import httpx

        deadline = time.monotonic() + self.ready_timeout_s
        waiting = list(self.replicas)
        while waiting:
            for r in list(waiting):
                code = ray.get(r.actor.exit_code.remote(), timeout=30)
                if code is not None:
                    tail = ray.get(r.actor.log_tail.remote(), timeout=30)
                    raise ClusterError(
                        f"replica {r.url} exited with status {code} before "
                        f"answering; its log ({r.info['log']}) ends:\n{tail}"
                    )
                try:
                    if httpx.get(f"{r.url}/models", timeout=5).status_code == 200:
                        waiting.remove(r)
                except httpx.HTTPError:
                    pass
            if waiting and time.monotonic() > deadline:
                raise ClusterError(
                    f"{len(waiting)} replica(s) did not answer GET /models within "
                    f"{self.ready_timeout_s:g} s (logs: "
                    f"{', '.join(r.info['log'] for r in waiting)})"
                )
            if waiting:
                time.sleep(POLL_S)

    def alive(self) -> list[str]:
        """The URLs of the replicas whose actor and server process still live."""
        import ray

        urls = []
        for r in self.replicas:
            try:
                if ray.get(r.actor.url.remote(), timeout=10):
                    urls.append(r.url)
            except Exception:  # the actor or its node is gone
                continue
        return urls

    def listing(self, urls: list[str] | None = None) -> EndpointList:
        urls = self.alive() if urls is None else urls
        return EndpointList(
            served_model=self.command.served_model, endpoints=urls, engine=self.command.engine,
            cluster=self.address or "local", checkpoint=self.command.checkpoint,
            replicas=[r.info for r in self.replicas if r.url in urls],
        )  # fmt: skip

    def stop(self) -> None:
        """Stop every server, then its actor; a replica already gone is skipped."""
        import ray

        if not ray.is_initialized():
            return
        for r in self.replicas:
            try:
                ray.get(r.actor.stop.remote(), timeout=30)
            except Exception:
                pass
            try:
                ray.kill(r.actor)
            except Exception:
                pass
        self.replicas = []


def serve(
    model: str, *, replicas: int = 1, checkpoint: str | None = None,
    cards: list[str] | tuple[str, ...] = (), options: dict[str, Any] | None = None,
    served_name: str | None = None, address: str | None = None, host: str | None = None,
    server_args: tuple[str, ...] = (), ready_timeout_s: float = 900.0,
) -> Replicas:  # fmt: skip
    """``replicas`` servers of model card ``model`` (its ``options`` overridden by
    ``options``) on the Ray cluster at ``address`` (None: a local one on 127.0.0.1), started
    and answering; stop them with ``.stop()`` or use the result as a context manager."""
    import dataclasses

    from cafe.adapters.resolve import resolve_model
    from cafe.cluster.servers import server_command

    resolved = resolve_model(model, checkpoint, list(cards))
    card = dataclasses.replace(resolved.card, options={**resolved.card.options, **(options or {})})
    cmd = server_command(card, resolved.checkpoint, served_name, tuple(server_args))
    pool = Replicas(cmd, replicas, address=address, host=host, ready_timeout_s=ready_timeout_s)
    pool.start()
    return pool
