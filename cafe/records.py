"""The records that flow between layers (DESIGN.md): each is a dataclass that serialises to one
JSON line. Every layer reads and writes these and nothing else, so a run folder can be re-scored,
re-judged and re-reported without the model."""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from cafe.errors import CafeError

T = TypeVar("T", bound="Record")


#: JSON leaves: returned as they are (the common case, checked first and by exact type)
_LEAVES = frozenset({str, int, float, bool, type(None)})


def _plain(v: Any) -> Any:
    if type(v) in _LEAVES:
        return v
    if isinstance(v, Record):
        return v.to_dict()
    if isinstance(v, list):
        return [x if type(x) in _LEAVES else _plain(x) for x in v]
    if isinstance(v, dict):
        return {k: x if type(x) in _LEAVES else _plain(x) for k, x in v.items()}
    if isinstance(v, tuple):
        return tuple(_plain(x) for x in v)
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return dataclasses.asdict(v)
    return v


class RecordError(ValueError):
    """A JSON object that is not a valid record: not an object, a field missing or of the
    wrong type. Readers add the file and line (cafe.store)."""


def kind_of(v: Any) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}
    return "null" if v is None else names.get(type(v), f"a {type(v).__name__}")


@functools.cache
def _field_names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


@functools.cache
def _field_types(cls: type) -> dict[str, tuple[Any, bool]]:
    """Each field's type and whether it is required (no default)."""
    hints = typing.get_type_hints(cls)
    return {
        f.name: (
            hints.get(f.name, Any),
            f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING,
        )
        for f in dataclasses.fields(cls)
    }


@functools.cache
def _field_checks(cls: type) -> tuple[tuple[str, Any, bool, Callable[[Any], bool]], ...]:
    """Each field's name, type, whether it is required, and its type check."""
    return tuple((n, tp, req, _checker(tp)) for n, (tp, req) in _field_types(cls).items())


def type_ok(value: Any, tp: Any) -> bool:
    """Whether a JSON value fits a field's type: unions, None, str, int, float, bool, lists
    (with their items' type), tuples, dicts, records given as objects; other types pass."""
    return _checker(tp)(value)


@functools.cache
def _checker(tp: Any) -> Callable[[Any], bool]:
    """``type_ok`` for one type, its shape worked out once (every field of every record read
    is checked: the typing introspection per value was most of a record's read time)."""
    if tp is Any or tp is object:
        return lambda v: True
    origin = typing.get_origin(tp)
    if origin is typing.Union or origin is types.UnionType:
        args = typing.get_args(tp)
        parts = [_checker(a) for a in args if a is not type(None)]
        if len(parts) == 1 and len(args) == 2:  # ``X | None``: most optional fields
            (one,) = parts
            return lambda v: v is None or one(v)
        parts = [_checker(a) for a in args]
        return lambda v: any(ok(v) for ok in parts)
    if tp is type(None):
        return lambda v: v is None
    if tp is bool:
        return lambda v: type(v) is bool
    if tp is int:
        return lambda v: isinstance(v, int) and type(v) is not bool
    if tp is float:
        return lambda v: isinstance(v, int | float) and type(v) is not bool
    if tp is str:
        return lambda v: isinstance(v, str)
    if tp is list or origin is list:
        args = typing.get_args(tp)
        item = _checker(args[0]) if args else None
        if item is None:
            return lambda v: isinstance(v, list | tuple)
        return lambda v: isinstance(v, list | tuple) and all(item(x) for x in v)
    if tp is tuple or origin is tuple:
        return lambda v: isinstance(v, list | tuple)
    if tp is dict or origin is dict:
        return lambda v: isinstance(v, dict)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return lambda v: isinstance(v, tp | dict)
    return lambda v: True


def type_name(tp: Any) -> str:
    if typing.get_origin(tp) is typing.Union or typing.get_origin(tp) is types.UnionType:
        return " or ".join(type_name(a) for a in typing.get_args(tp))
    if tp is type(None):
        return "null"
    origin = typing.get_origin(tp)
    if origin is not None:
        args = typing.get_args(tp)
        inner = f" of {type_name(args[0])}" if origin is list and args else ""
        return f"{origin.__name__}{inner}"
    return getattr(tp, "__name__", str(tp))


class Record:
    """Mixin: dict / JSON round trip that ignores unknown keys (forward compatible files)."""

    def to_dict(self) -> dict[str, Any]:
        # what dataclasses.asdict gives for JSON data, without its deepcopy of every leaf
        # (3-4x faster; records are written once per item on the hot path)
        return {n: _plain(getattr(self, n)) for n in _field_names(type(self))}

    def to_json(self) -> str:
        from cafe.jsontext import strict_dumps

        return strict_dumps(self.to_dict(), ensure_ascii=False, sort_keys=False)

    @classmethod
    def from_dict(cls: type[T], data: dict[str, Any]) -> T:
        """The record from a JSON object: unknown keys ignored; a missing field or a value of
        the wrong type is a RecordError naming the field (a damaged line, never a TypeError
        later)."""
        if not isinstance(data, dict):
            raise RecordError(f"expected a JSON object, found {kind_of(data)}")
        types = _field_types(cls)
        for name, tp, required, ok in _field_checks(cls):
            if name not in data:
                if required:
                    raise RecordError(f"field {name}: missing")
            elif not ok(data[name]):
                raise RecordError(
                    f"field {name}: expected {type_name(tp)}, found {kind_of(data[name])}"
                )
        return cls(**{k: v for k, v in data.items() if k in types})


@dataclass
class Problem(Record):
    """One bad input, reported as a single line naming file, sample id and field."""

    file: str
    message: str
    sample_id: str | None = None
    field: str | None = None

    def __str__(self) -> str:
        parts = [self.file or "<input>"]
        if self.sample_id is not None:
            parts.append(f"sample {self.sample_id}")
        if self.field is not None:
            parts.append(f"field {self.field}")
        return ": ".join(parts) + f": {self.message}"


class InputError(CafeError, ValueError):
    """Raised for bad input; carries the Problem. Caught per item unless --strict; a CafeError,
    so a command it escapes from prints its one line (file, sample id, field), no traceback."""

    def __init__(self, problem: Problem):
        super().__init__(str(problem))
        self.problem = problem


@dataclass
class Event(Record):
    """A ground-truth audio event (synth benchmark, captions with structure)."""

    onset: float
    offset: float
    label: str
    attributes: dict[str, Any] = field(default_factory=dict)
    required: bool = False


@dataclass
class Sample(Record):
    id: str
    bench: str
    version: str
    question: str
    choices: list[str]
    answer: str | None  # None where the benchmark ships no answers (MMAU test)
    audio: list[str]  # absolute paths
    meta: dict[str, Any] = field(default_factory=dict)  # task/modality/category/difficulty…
    caption: str | None = None
    events: list[Event] | None = None
    error: str | None = None  # set by a loader for an item it could identify but not use

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Sample:
        s = super().from_dict(data)
        if s.events is not None:
            s.events = [e if isinstance(e, Event) else Event.from_dict(e) for e in s.events]
        return s


@dataclass
class Request(Record):
    sample_id: str
    run_index: int
    messages: list[dict[str, Any]]  # chat messages; content parts {"type": "text"|"audio", …}
    audio: list[str]
    generation: dict[str, Any]  # max_new_tokens, temperature, top_p, repetition_penalty, …
    seed: int
    prompt_style: str
    template_hash: str


@dataclass
class Completion(Record):
    sample_id: str
    run_index: int
    text: str | None
    output_tokens: int | None = None
    latency_s: float = 0.0
    backend: dict[str, Any] = field(default_factory=dict)  # engine, model, usage, finish reason
    error: str | None = None


@dataclass
class Prediction(Record):
    sample_id: str
    run_index: int
    model: str
    prompt_style: str
    template_hash: str
    raw_output: str | None
    sections: dict[str, Any] = field(default_factory=dict)  # parsed output sections
    answer: str | None = None  # the answer mapped to a choice where possible (lenient)
    parse_status: str = "ok"  # mapping: ok | no_answer | unmapped | failed
    correct: bool = False  # the benchmark's rule on answer_text (the headline)
    answer_text: str | None = None  # the answer section as the official script sees it
    correct_lenient: bool = False  # the same rule on the mapped choice
    reasoning_tokens: int | None = None
    seed: int | None = None
    latency_s: float = 0.0
    error: str | None = None  # failed items: the one-line reason
    #: a cascade's front output (text, front, latency_s, cached): what the answering model read
    front: dict[str, Any] | None = None
    #: answers by option likelihood: normalise, how, choices, logprobs, scores (per option)
    option_scores: dict[str, Any] | None = None
    # what this item's call added to the folder's counters: a call (tokens, cost) or a cache
    # hit (cafe.runner.tally); the counters are the sum of these over the lines written
    call: dict[str, Any] = field(default_factory=dict)


@dataclass
class Judgement(Record):
    sample_id: str
    run_index: int
    judge: str  # judge identity (client + model)
    template_hash: str
    raw_reply: str | None
    required_events: list[str] = field(default_factory=list)
    all_caption_events: list[str] = field(default_factory=list)
    all_reasoning_events: list[str] = field(default_factory=list)
    matched_events: list[str] = field(default_factory=list)
    error_matched: list[str] = field(default_factory=list)  # hallucinated
    error_use: list[str] = field(default_factory=list)  # misused
    neutral_events: list[str] = field(default_factory=list)
    missed_events: list[str] = field(default_factory=list)
    status: str = "ok"  # ok | invalid | failed
    reason: str | None = None
    # what its call added to the section's counters (calls sent, cache hits; none: made
    # without a call); the counters are the sum over the records on disk (cafe.counters)
    call: dict[str, Any] = field(default_factory=dict)


@dataclass
class Verdict:
    """What an answer judge says of one (item, run): the option the model chose
    (cafe.judge.answer), or an official rule's reading (cafe.benchmarks.official_judge.Judged)."""

    sample_id: str
    run_index: int
    choice: str | None  # the option the judge says the model chose
    status: str  # ok | none (the model chose nothing) | unparseable | failed
    raw: str | None = None
    source: str = "judge"  # judge | rule (selective: the official rule decided, no call)
    call: dict[str, Any] = field(default_factory=dict)  # its share of the section's counters


@dataclass
class RubricScore(Record):
    """One (item, run) scored against its MMAR rubric by an LLM judge (cafe.judge.rubric)."""

    sample_id: str
    run_index: int
    judge: str  # judge identity (client kind + model)
    template_hash: str
    status: str  # ok | wrong | invalid | failed | no_rubric | no_prediction
    correct: bool = False  # the answer passes the official string match (only those are rated)
    score: float | None = None  # 0-1: trimmed mean of the raters; 0.0 when wrong
    rater_scores: list[float | None] = field(default_factory=list)  # None: rater never valid
    raw_replies: list[list[str]] = field(default_factory=list)  # per rater, every attempt
    invalid_replies: int = 0  # replies that failed validation (each was retried)
    notes: list[str] = field(default_factory=list)  # e.g. criterion names the judge renamed
    protocol: dict[str, Any] = field(default_factory=dict)  # raters, trim, temperature, seed
    reason: str | None = None
    call: dict[str, Any] = field(default_factory=dict)  # its raters' calls and cache hits


#: bounds on YAML users write by hand (cards, recipes, leaderboards, -o values): a larger file,
#: or one whose aliases expand past YAML_MAX_NODES (an alias bomb), is refused in one line
YAML_MAX_BYTES = 16 * 1024 * 1024
YAML_MAX_NODES = 1_000_000


class YamlBoundsError(ValueError):
    """A YAML text past the bounds (size, expanded nodes, recursive aliases)."""


def _expanded_nodes(root: Any, limit: int) -> int:
    """How many nodes ``root`` holds with every alias expanded; each distinct node is visited
    once (subtree sizes memoised), so an alias bomb is measured without being built. A node
    that contains itself (a recursive alias) is refused."""
    from yaml.nodes import CollectionNode, MappingNode

    sizes: dict[int, int] = {}
    active: set[int] = set()
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if not isinstance(node, CollectionNode):
            sizes[key] = 1
            continue
        children = (
            [c for pair in node.value for c in pair]
            if isinstance(node, MappingNode)
            else list(node.value)
        )
        if done:
            active.discard(key)
            sizes[key] = 1 + sum(sizes[id(c)] for c in children)
            if sizes[key] > limit:
                raise YamlBoundsError(f"aliases expand to more than {limit:,} nodes")
            continue
        if key in sizes:
            continue
        if key in active:
            raise YamlBoundsError("a recursive alias (a node that contains itself)")
        active.add(key)
        stack.append((node, True))
        stack.extend((c, False) for c in children if id(c) not in sizes)
    return sizes[id(root)]


def load_yaml(text: str, max_nodes: int = YAML_MAX_NODES) -> Any:
    """``yaml.safe_load`` with bounds: at most YAML_MAX_BYTES of text and ``max_nodes`` nodes
    once aliases are expanded (YamlBoundsError); malformed YAML raises yaml.YAMLError as
    safe_load does. The one way cafe reads YAML."""
    import yaml

    if len(text) > YAML_MAX_BYTES:
        raise YamlBoundsError(f"larger than {YAML_MAX_BYTES // 1024 // 1024} MB")
    from cafe.jsontext import MAX_DEPTH, bad_text

    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _expanded_nodes(node, max_nodes)
        value = loader.construct_document(node)
    except RecursionError:  # the parser recurses per level
        raise YamlBoundsError(f"nested more than {MAX_DEPTH} levels deep") from None
    finally:
        loader.dispose()
    found = bad_text(value)  # too deep for what reads it later, a NUL, a lone surrogate
    if found is not None:
        raise YamlBoundsError(f"{found[0]}: {found[1]}" if found[0] else found[1])
    return value


def yaml_problem(e: Exception) -> tuple[str, str]:
    """(":line" or "", what) for a YAML error, without the parser's snippet of the text (it
    may quote a secret)."""
    mark = getattr(e, "problem_mark", None)
    where = f":{mark.line + 1}" if mark is not None else ""
    what = getattr(e, "problem", None) or (str(e) if isinstance(e, YamlBoundsError) else "")
    return where, what or type(e).__name__


def read_yaml(path: str | Path) -> Any:
    """A YAML file's content (bounded: cafe.records.load_yaml); unreadable, not UTF-8, too large,
    an alias bomb or malformed YAML is one InputError naming the file and line (cards, recipes,
    leaderboards: files users write by hand)."""
    import yaml

    p = Path(path)
    try:
        if p.stat().st_size > YAML_MAX_BYTES:
            raise InputError(Problem(str(p), f"larger than {YAML_MAX_BYTES >> 20} MB"))
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(Problem(str(p), f"cannot read ({e})")) from None
    try:
        return load_yaml(text)
    except (yaml.YAMLError, YamlBoundsError) as e:
        where, what = yaml_problem(e)
        raise InputError(Problem(f"{p}{where}", f"not valid YAML ({what})")) from None
