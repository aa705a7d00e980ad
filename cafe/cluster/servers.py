"""The command that serves a model card over the OpenAI protocol, by the card's engine: vLLM's
`vllm serve` on GPUs (tensor x pipeline parallel GPUs per replica), llama.cpp's server on a CPU
(a GGUF, as the cascade's back runs it in-process). A table, not a chain: a new engine is an
entry."""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from cafe.adapters.base import ModelCard
from cafe.errors import ConfigError


@dataclass(frozen=True)
class ServerCommand:
    """One replica's command with ``{host}`` and ``{port}`` left to fill where it is placed,
    and the resources the replica asks Ray for."""

    argv: tuple[str, ...]
    gpus: float
    cpus: float
    served_model: str
    engine: str
    #: which weights it serves (``weights_identity``), written to the endpoint file: a run
    #: keys its cache on it, and replicas must agree on it, whatever name they answer to
    checkpoint: str = ""

    def for_address(self, host: str, port: int) -> list[str]:
        return [a.format(host=host, port=port) for a in self.argv]


#: what a GGUF file starts with (llama.cpp's format)
GGUF_MAGIC = b"GGUF"
#: bytes read from each end of a weights file for its identity
_ENDS = 1 << 20


def weights_identity(path: Path) -> str:
    """A weights file's identity without reading gigabytes: SHA-256 over its size and its first
    and last MiB (a GGUF's header names its architecture, quantisation and tensors)."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        size = f.seek(0, 2)
        h.update(str(size).encode())
        f.seek(0)
        h.update(f.read(_ENDS))
        f.seek(max(0, size - _ENDS))
        h.update(f.read(_ENDS))
    return f"sha256-size-head-tail:{h.hexdigest()}"


def _llama_cpp(card: ModelCard, checkpoint: str, name: str, o: dict[str, Any]) -> ServerCommand:
    from cafe.adapters.llama_cpp import package_path

    path, _ = package_path(checkpoint)
    if not path.is_file():
        raise ConfigError(f"model {card.name!r}: checkpoint {checkpoint}: no such GGUF file")
    try:  # checked here, before a cluster starts and a server fails on it
        with path.open("rb") as f:
            head = f.read(len(GGUF_MAGIC) + 4)
    except OSError as e:
        raise ConfigError(f"checkpoint {checkpoint}: cannot read it ({e.strerror})") from None
    if len(head) < 8 or head[:4] != GGUF_MAGIC:
        raise ConfigError(
            f"model {card.name!r}: checkpoint {checkpoint}: not a GGUF file (it does not start "
            "with the GGUF header; damaged or incomplete download?)"
        )
    threads = int(o.get("n_threads") or 1)
    argv = (
        sys.executable, "-m", "cafe.cluster.llama_server", "--model", str(path),
        "--model_alias", name, "--host", "{host}", "--port", "{port}",
        "--n_ctx", str(int(o.get("n_ctx") or 2048)),
        "--n_threads", str(threads), "--seed", "0", "--verbose", "False",
    )  # fmt: skip
    return ServerCommand(argv, gpus=0, cpus=threads, served_model=name, engine="llama-cpp",
                         checkpoint=weights_identity(path))  # fmt: skip


def _vllm(card: ModelCard, checkpoint: str, name: str, o: dict[str, Any]) -> ServerCommand:
    tp = int(o.get("tensor_parallel_size") or 1)
    pp = int(o.get("pipeline_parallel_size") or 1)
    argv = [
        "vllm", "serve", checkpoint, "--host", "{host}", "--port", "{port}",
        "--served-model-name", name, "--tensor-parallel-size", str(tp),
        "--pipeline-parallel-size", str(pp),
    ]  # fmt: skip
    for key in ("max_model_len", "gpu_memory_utilization", "dtype", "max_num_seqs"):
        if o.get(key) is not None:
            argv += [f"--{key.replace('_', '-')}", str(o[key])]
    if o.get("trust_remote_code"):
        argv.append("--trust-remote-code")
    local = Path(checkpoint)  # a hub id names its weights; a local folder by its full path
    ident = str(local.resolve()) if local.exists() else checkpoint
    return ServerCommand(tuple(argv), gpus=tp * pp, cpus=1, served_model=name, engine="vllm",
                         checkpoint=ident)  # fmt: skip


#: the card's adapter -> how its model is served
SERVERS: dict[str, Callable[[ModelCard, str, str, dict[str, Any]], ServerCommand]] = {
    "llama-cpp": _llama_cpp,
    "vllm": _vllm,
}


def server_command(
    card: ModelCard, checkpoint: str | None, served_name: str | None, extra: tuple[str, ...] = ()
) -> ServerCommand:
    """The serving command of ``card`` (its options decide parallelism and context), with
    ``extra`` arguments appended as they are."""
    make = SERVERS.get(card.adapter)
    if make is None:
        raise ConfigError(
            f"model {card.name!r} (adapter {card.adapter}): `cafe serve` serves cards of "
            f"adapter {' or '.join(sorted(SERVERS))}; serve others with their own server and "
            "pass its URLs with --endpoint"
        )
    ckpt = checkpoint or card.checkpoint
    if not ckpt:
        raise ConfigError(f"model {card.name!r}: no checkpoint to serve (--checkpoint PATH)")
    cmd = make(card, ckpt, served_name or card.name, dict(card.options))
    return replace(cmd, argv=cmd.argv + tuple(extra))
