"""The adapter contract: a model card says which adapter, checkpoint, prompt style and decoding
defaults a model uses; an adapter turns a batch of Requests into Completions, in order."""

from __future__ import annotations

import inspect
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

from cafe.records import Completion, Request
from cafe.registry import Registry

#: ModelCard fields holding mappings (the others are strings), and those that may be null
_DICT_FIELDS = frozenset({"generation", "options", "trained"})
_OPTIONAL_FIELDS = frozenset({"checkpoint", "launch", "unsupported"})


@dataclass(frozen=True)
class ModelCard:
    name: str
    adapter: str  # registry name of the adapter class
    checkpoint: str | None = None  # hub id, local path or API model name
    prompt_style: str = "lalm"
    generation: dict[str, Any] = field(default_factory=dict)
    group: str = "LALM"  # paper group: LALM | LARM | Commercial | Ours | Baseline
    engine: str = "transformers"  # transformers | vllm | openai-compatible | gemini | openai | cpu
    description: str = ""
    launch: str | None = None  # how to start its server, for server-backed models
    options: dict[str, Any] = field(default_factory=dict)  # adapter keyword arguments
    unsupported: str | None = None  # why this card cannot run as written (refused at load)
    #: a checkpoint `cafe train` wrote: stage, base model, recipe (name, sha256), data sha256
    trained: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, name: str, data: dict[str, Any]) -> ModelCard:
        known = set(cls.__dataclass_fields__)
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"model card {name!r}: unknown field(s) {sorted(unknown)}")
        for key, value in data.items():
            if key == "name":
                continue
            want = dict if key in _DICT_FIELDS else str
            if not (isinstance(value, want) or (value is None and key in _OPTIONAL_FIELDS)):
                what = "a mapping" if want is dict else "a string"
                raise ValueError(
                    f"model card {name!r}: field {key}: {what} expected, not "
                    f"{type(value).__name__} {str(value)[:40]!r}"
                )
        return cls(**{**data, "name": name})

    @property
    def greedy(self) -> bool:
        """Greedy decoding: ``--runs K`` would repeat one generation K times."""
        return is_greedy(self.generation)


def is_greedy(generation: dict[str, Any]) -> bool:
    """Whether these decoding settings are greedy. Temperature 0 is greedy whatever
    ``do_sample`` says (engines treat it so); without a temperature, ``do_sample`` decides."""
    temperature = generation.get("temperature")
    if temperature is not None and float(temperature) == 0.0:
        return True
    return not generation.get("do_sample", (temperature or 0) > 0)


_WORD = re.compile(r"\w+|[^\w\s]")


def fallback_token_count(text: str) -> int:
    """Documented fallback when an adapter has no tokenizer: words and punctuation marks.

    Close to a BPE count for English prose (BPE splits rare words further, so it undercounts by
    roughly 10-30%); reports say which counter a run used (Adapter.token_counter)."""
    return len(_WORD.findall(text or ""))


class Adapter(ABC):
    """Subclass, decorate with @ADAPTERS.register("name"), and the CLI can run it.

    Construction loads the model (``card.checkpoint`` or the ``checkpoint`` override).
    ``generate`` must return one Completion per Request, in the same order; a per-item failure is
    a Completion with ``error`` set, never an exception that loses the batch."""

    #: largest batch the runner should send in one generate() call
    default_batch_size: int = 1
    #: how many generate() calls may run at once (threads); API adapters raise this
    default_concurrency: int = 1
    #: name of the token counter used for reasoning lengths ("fallback-words" or a tokenizer id)
    token_counter: str = "fallback-words"
    #: (module, extra): an engine the adapter needs, checked before loading (cafe.adapters.resolve)
    requires: tuple[str, str] | None = None
    #: how to install ``requires`` where pip on the extra alone is not the way (a wheel that
    #: must be built portably, weights from another package); None: the extra
    install: str | None = None
    #: whether generate() reads the clips: one that never does (a chance baseline on metadata)
    #: runs items whose audio is missing or damaged instead of failing them
    reads_audio: bool = True
    #: whether the checkpoint is weights a hub id names (checked against the cache and the hub)
    weights_from_hub: bool = False
    #: options that change how calls are made, not what the model replies (batching, threads,
    #: servers, timeouts): recorded in the manifest but not part of a run's identity, so a run
    #: can be resumed with another concurrency or a restarted server
    execution_options: frozenset[str] = frozenset(
        {"batch_size", "concurrency", "endpoint", "endpoints", "timeout_s", "max_retries"}
        | {"base_delay", "max_delay", "break_after", "replicas", "ray"}
    )

    def __init__(self, card: ModelCard, checkpoint: str | None = None, **options: Any):
        if card.unsupported:
            raise ValueError(f"model card {card.name!r} is not supported: {card.unsupported}")
        self.card = card
        self.checkpoint = checkpoint or card.checkpoint
        self.options = {**card.options, **options}

    @abstractmethod
    def generate(self, requests: list[Request]) -> list[Completion]: ...

    def count_tokens(self, text: str) -> int:
        return fallback_token_count(text)

    def identity(self) -> dict[str, Any]:
        """What identifies this model's outputs: goes into cache keys and the manifest."""
        return {
            "adapter": self.card.adapter,
            "checkpoint": self.checkpoint,
            "model": self.card.name,
        }

    def served_identity(self) -> dict[str, Any] | None:
        """What tells a served model's weights from another server's answering to the same
        name (what the server reports, where it is): part of the call cache key and recorded
        in the manifest. None for weights the run loads itself (their fingerprint is in the
        spec)."""
        return None

    def close(self) -> None:  # release GPU memory, sessions, servers
        pass


ADAPTERS: Registry[type[Adapter]] = Registry(
    "adapter", entry_point_group="cafe.adapters", base=Adapter
)


def call_adapter(adapter: Any, requests: list[Request], log: Any = None) -> list[Completion]:
    """One generate() call. The contract says per-item errors; an exception raised by adapter
    code (a bug, not the weather) becomes a one-line error per item marked as an adapter
    failure (not retried by re-runs), its traceback once in ``log`` (cafe.failures.RunLog)."""
    try:
        completions = adapter.generate(requests)
        if inspect.isawaitable(completions):  # an async generate: one loop per batch
            from cafe.execution import run_sync

            completions = run_sync(completions)  # type: ignore[arg-type]
        if len(completions) != len(requests):
            raise RuntimeError(
                f"adapter returned {len(completions)} completions for {len(requests)}"
            )
        return list(completions)
    except Exception as e:
        first = (str(e).strip().splitlines() or [""])[0]
        reason = f"adapter error: {type(e).__name__}: {first}"
        if log is not None:
            log.exception("generate() raised", e)
            reason += f" (traceback in {log.path})"
        return [
            Completion(r.sample_id, r.run_index, None, error=reason, backend={"failure": "adapter"})
            for r in requests
        ]
