"""The run spec: one frozen value that says everything deciding a run's predictions (after HELM's
RunSpec). It is built once from the command line or the API, written as manifest.json's "spec",
and compared whole when a folder is resumed.

Left out on purpose, because they do not change a prediction: how calls are made (batch size,
concurrency, servers: ``Adapter.execution_options``), the cache, --strict, progress, and the
judge (each judge writes its own judgements.<judge>.jsonl beside the same predictions). Secrets
(options named like key / token / password) are never written; pass them in the environment."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cafe.errors import CafeError

DEFAULT_MODEL = "reference"
DEFAULT_BENCH = "synth"
#: run folder format: 1 wrote no spec (cafe before the run spec); 2 writes manifest["spec"]
FORMAT = 2


class RunError(CafeError, ValueError):
    """A run that cannot start or must stop (--strict); one line saying what to fix. Library code
    raises it; the command line prints it as an error."""


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


@dataclass(frozen=True)
class RunSpec:
    model: str  # model card name
    adapter: str  # registry name of the adapter class
    adapter_options: Mapping[str, Any]  # card options + -o pairs (no secrets, no execution)
    checkpoint: str | None
    fingerprint: str | None  # content fingerprint of a local checkpoint (None: hub id / API)
    bench: str
    version: str
    data_sha256: str | None  # of the benchmark's metadata file
    limit: int | None  # the first N items; None: all of them
    runs: int  # sampled generations per item; run k uses seed + k
    seed: int
    prompt_style: str
    template_hash: str
    generation: Mapping[str, Any]  # decoding settings sent with every request
    #: a listening control ({"name": "silence" | "noise" | "shuffled" | "text-only", "seed"}):
    #: the same run with the audio replaced (cafe.controls); None for the real audio
    control: Mapping[str, Any] | None = None
    #: a choice ordering (cafe.benchmarks.choice_order: {"k", "of", "mode", "seed"}): the same
    #: run with each item's options reordered; None (and left out of the dict, so a run without
    #: --permute-choices keeps its identity) for the benchmark's own order
    permutation: Mapping[str, Any] | None = None
    #: an --ids selection ({"sha256", "n"} of the sorted ids; cafe.benchmarks.ids); None (and
    #: left out of the dict) for every item
    ids: Mapping[str, Any] | None = None

    #: fields that select which (item, run) pairs the folder holds; the rest is its identity
    SELECTION = ("limit", "runs")
    #: the fields that decide what one model call replies: the model-call cache key is these
    #: plus the request (messages with audio by content hash, seed, run index). The benchmark,
    #: its data hash, the selection and a control decide which requests are made, not what a
    #: request returns (a control's replaced audio is in the request's own audio hashes).
    CALL_FIELDS = (
        "model", "adapter", "adapter_options", "checkpoint", "fingerprint",
        "prompt_style", "template_hash", "generation", "seed",
    )  # fmt: skip

    def __hash__(self) -> int:
        return hash(_canonical(self.to_dict()))

    @property
    def served_model(self) -> str | None:
        """The model a server-backed adapter asks for (``-o model=NAME``)."""
        name = self.adapter_options.get("model")
        return None if name is None else str(name)

    def call_identity(self) -> dict[str, Any]:
        """What a model call's cache key takes from the run: every identity-bearing adapter
        option (the served model among them), decoding, the prompt, the checkpoint's content,
        the seed. Execution options (batch size, concurrency, endpoints, timeouts) are never in
        the spec, so they cannot split the cache."""
        d = self.to_dict()
        return {k: d[k] for k in self.CALL_FIELDS}

    @property
    def seeds(self) -> list[int]:
        return [self.seed + k for k in range(self.runs)]

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["adapter_options"] = dict(self.adapter_options)
        d["generation"] = dict(self.generation)
        d["control"] = None if self.control is None else dict(self.control)
        for name in ("permutation", "ids"):  # absent unless set: older identities unchanged
            if d[name] is None:
                del d[name]
            else:
                d[name] = dict(d[name])
        return d

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunSpec:
        names = [f.name for f in dataclasses.fields(cls)]
        optional = {f.name for f in dataclasses.fields(cls) if f.default is not dataclasses.MISSING}
        unknown = sorted(set(data) - set(names))
        missing = sorted(set(names) - set(data) - optional)
        if unknown or missing:
            raise ValueError(f"run spec with fields {unknown or missing} is not this cafe's format")
        return cls(**{k: data[k] for k in names if k in data})

    def differences(self, other: RunSpec) -> list[tuple[str, Any, Any]]:
        """(field, self's value, other's value) for every identity field that differs; dict
        fields name the differing key (``adapter_options.model``)."""
        out: list[tuple[str, Any, Any]] = []
        for f in dataclasses.fields(self):
            if f.name in self.SELECTION:
                continue
            a, b = getattr(self, f.name), getattr(other, f.name)
            if isinstance(a, Mapping) and isinstance(b, Mapping):
                for k in sorted(set(a) | set(b)):
                    if a.get(k) != b.get(k):
                        out.append((f"{f.name}.{k}", a.get(k), b.get(k)))
            elif a != b:
                out.append((f.name, a, b))
        return out

    def covers(self, other: RunSpec) -> bool:
        """Whether this spec's selection holds every (item, run) pair of ``other``'s."""
        big = float("inf")
        return (self.limit or big) >= (other.limit or big) and self.runs >= other.runs

    def selection(self) -> str:
        items = "all items" if self.limit is None else f"{self.limit} items"
        return f"{items} x {self.runs} run{'s' if self.runs != 1 else ''}"

    def variant(self, card_defaults: Mapping[str, Any]) -> dict[str, Any]:
        """The identity choices that differ from the model card's defaults and that the folder
        name does not already spell (the served model does): a hash of them tells folders
        apart."""
        mine = {
            "adapter_options": {
                k: v
                for k, v in self.adapter_options.items()
                if k != "model" and card_defaults.get("options", {}).get(k) != v
            },
            "prompt_style": self.prompt_style,
            "template_hash": self.template_hash,
            "generation": dict(self.generation),
            "seed": self.seed,
        }
        base = {
            "adapter_options": {},
            "prompt_style": card_defaults.get("prompt_style"),
            "template_hash": card_defaults.get("template_hash"),
            "generation": dict(card_defaults.get("generation") or {}),
            "seed": 0,
        }
        return {k: v for k, v in mine.items() if v != base[k]}

    def short_hash(self, value: Any) -> str:
        return hashlib.sha256(_canonical(value).encode()).hexdigest()[:8]


@dataclass(frozen=True)
class RunRequest:
    """What one ``run()`` call asks for: the choices plan resolves into the RunSpec (model card,
    checkpoint, data, selection, prompt, decoding, control), the folder, and the per-call knobs
    that are not identity. `cafe run` builds one from its flags; ``cafe.api.run``'s keywords are
    its fields. Types and defaults are declared here only."""

    model: str = DEFAULT_MODEL
    bench: str = DEFAULT_BENCH
    # resolved into the RunSpec (the identity)
    checkpoint: str | None = None
    data: str | None = None
    version: str | None = None
    runs: int = 1
    limit: int | None = None
    seed: int = 0
    prompt_style: str | None = None
    prompt_template: str | Path | None = None
    max_new_tokens: int | None = None
    #: the adapter's options (``-o KEY=VALUE``), apart from the run's own, so any name may be
    #: one (model, seed, batch_size…); decoding keys among them set the card's decoding
    options: Mapping[str, Any] | None = None
    cards: Sequence[str] | None = None  # extra model card files
    audio_root: str | Path | None = None
    #: a listening control (cafe.controls: silence, noise, shuffled, text-only) and its seed
    control: str | None = None
    control_seed: int = 0
    #: a caption-only control's captions file (None: the benchmark's reference captions)
    control_captions: str | Path | None = None
    #: a choice ordering ({"k", "mode", "seed", "index"}: cafe.benchmarks.choice_order)
    permutation: Mapping[str, Any] | None = None
    ids: str | Path | None = None  # --ids FILE: only the items it lists (cafe.benchmarks.ids)
    # where, and what links to it
    out: str | Path | None = None
    control_of: str | Path | None = None  # the real run's folder, linked from the manifest
    # per call: how calls are made, never identity
    batch_size: int | None = None
    concurrency: int | None = None
    cache: bool = True
    strict: bool = False  # stop at the first bad input
    progress: bool = True
    retry_failed: bool = False  # also retry items whose adapter raised
    #: None: the benchmark's ``default_judge``; "none" skips judging
    judge: str | None = None
    judge_options: Mapping[str, Any] | None = None

    #: the fields that rebuild a run's spec (rerun_options); the rest: per call
    SPEC_INPUTS = (
        "model", "bench", "checkpoint", "data", "version", "runs", "limit", "seed",
        "prompt_style", "prompt_template", "max_new_tokens", "options", "ids",
    )  # fmt: skip
    #: per-call knobs a listening control run takes over from its real run
    EXECUTION = ("batch_size", "concurrency", "strict", "progress", "cache", "cards")

    def pick(self, names: Sequence[str]) -> dict[str, Any]:
        return {k: getattr(self, k) for k in names}


def rerun_options(manifest: dict[str, Any]) -> dict[str, Any]:
    """RunRequest fields that rebuild a folder's spec, from its manifest (format 2: "spec")."""
    spec = manifest.get("spec")
    if not spec:
        raise ValueError(
            "the run folder has no run spec (written by an older cafe): run the controls with "
            "`cafe run … --controls LIST` and the real run's options instead"
        )
    from cafe.prompts import load_template

    try:
        packaged = load_template(spec["prompt_style"]).hash
    except (KeyError, FileNotFoundError, ValueError):
        packaged = None
    own = spec["template_hash"] != packaged  # the user's template: its text, kept
    gen, prompt = spec.get("generation") or {}, manifest.get("prompt") or {}
    keep = ("model", "bench", "checkpoint", "version", "runs", "limit", "seed", "prompt_style")
    return {**{k: spec.get(k) for k in keep}, "data": (manifest.get("bench") or {}).get("source"),
            "prompt_template": prompt.get("template_source") if own else None,
            "max_new_tokens": gen.get("max_new_tokens"),
            "options": dict(spec.get("adapter_options") or {})}  # fmt: skip


def mismatch_message(folder: Any, old: RunSpec, new: RunSpec) -> str | None:
    """One line naming each differing identity field with the folder's and this call's values,
    or None when the identities agree."""
    diffs = old.differences(new)
    if not diffs:
        return None
    fields = "; ".join(f"{name}: {a!r} in the folder, {b!r} now" for name, a, b in diffs)
    return (
        f"{folder} holds a different run ({fields}); pass --out NEW_FOLDER to start a separate "
        "run (or delete the folder)"
    )
