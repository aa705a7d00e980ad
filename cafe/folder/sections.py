"""The registry of metrics.json sections: who writes each, which keys read higher-is-better,
and what it is derived from (a record file of the folder or another section).

Every section is stamped, when written, with the digests of its inputs (``inputs``: record
count + content digest per input); ``stale`` compares a stamp with the folder's inputs now. So
when predictions or judgements change (a run extended, resumed with retries, re-judged under
another spec) every section derived from them is found by construction, whoever wrote it
(plugins too): no hand-kept list of sections to clear. A plugin cannot take a built-in name."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from cafe.errors import CafeError

#: the key every written section carries: its inputs' digests when it was computed
STAMP = "inputs"
#: the folder's record inputs and what each is itself derived from
RECORD_INPUTS: dict[str, tuple[str, ...]] = {"predictions": (), "judgements": ("predictions",)}
#: a plugin metric reads every record (cafe.metrics.RunRecords) unless it says otherwise
PLUGIN_DERIVES = ("predictions", "judgements")


class SectionNameError(CafeError):
    """A plugin section named like one of cafe's own."""


@dataclass(frozen=True)
class SectionInfo:
    name: str
    owner: str  # the command that writes it
    derives_from: tuple[str, ...]  # record inputs (RECORD_INPUTS) or other sections' names
    higher_is_better: tuple[str, ...] = ()
    lower_is_better: tuple[str, ...] = ()
    version: int = 1
    builtin: bool = True

    def direction(self, key: str) -> str | None:
        """ "up" / "down" for a key whose direction is known, else None."""
        if key in self.higher_is_better:
            return "up"
        return "down" if key in self.lower_is_better else None


_SECTIONS: dict[str, SectionInfo] = {}


def register_section(info: SectionInfo) -> SectionInfo:
    """Add a section; a plugin's may be re-registered, a built-in name is refused."""
    old = _SECTIONS.get(info.name)
    if old is not None and old.builtin and old != info:
        raise SectionNameError(
            f"section {info.name!r} is cafe's own (written by `{old.owner}`): register your "
            f"metric under another name"
        )
    unknown = [d for d in info.derives_from if d not in RECORD_INPUTS and d not in _SECTIONS]
    if unknown:
        raise CafeError(f"section {info.name!r}: derives from unknown input(s) {unknown}")
    _SECTIONS[info.name] = info
    return info


def plugin_section(name: str, derives_from: Iterable[str] = PLUGIN_DERIVES) -> SectionInfo:
    """Register (or refresh) a plugin metric's section; refuses a built-in name."""
    return register_section(
        SectionInfo(name, "a plugin metric", tuple(derives_from), builtin=False)
    )


def is_builtin(name: str) -> bool:
    info = _SECTIONS.get(name)
    return info is not None and info.builtin


def section_info(name: str) -> SectionInfo:
    """The registered section, or what an unknown one (a plugin not loaded now) is taken as."""
    return _SECTIONS.get(name) or SectionInfo(
        name, "a plugin metric", PLUGIN_DERIVES, builtin=False
    )


def sections() -> dict[str, SectionInfo]:
    return dict(_SECTIONS)


def record_inputs(name: str) -> set[str]:
    """The record inputs a section depends on, through the sections it derives from."""
    out: set[str] = set()
    todo, seen = list(section_info(name).derives_from), {name}
    while todo:
        d = todo.pop()
        if d in RECORD_INPUTS:
            out.add(d)
            todo.extend(RECORD_INPUTS[d])
        elif d not in seen:
            seen.add(d)
            todo.extend(section_info(d).derives_from)
    return out


def digest(rows: Iterable[Any]) -> dict[str, Any]:
    """An input's stamp: how many records, and a digest of their content."""
    h = hashlib.sha256()
    n = 0
    # ASCII JSON: a lone surrogate (which a reply may carry in) hashes instead of failing
    for row in rows:
        h.update(json.dumps(row, sort_keys=True).encode() + b"\n")
        n += 1
    return {"records": n, "digest": h.hexdigest()[:16]}


def section_digest(value: Any) -> dict[str, Any]:
    body = {k: v for k, v in value.items() if k != STAMP} if isinstance(value, dict) else value
    return digest([body])


def stamp(name: str, metrics: dict[str, Any], inputs: Callable[[str], Any]) -> dict[str, Any]:
    """The ``inputs`` stamp of section ``name`` computed now: ``inputs(record)`` gives a record
    input's digest; a section it derives from is digested from ``metrics``."""
    out: dict[str, Any] = {r: inputs(r) for r in sorted(record_inputs(name))}
    for d in section_info(name).derives_from:
        if d not in RECORD_INPUTS:
            out[f"section:{d}"] = section_digest(metrics.get(d))
    return out


def stale(
    metrics: dict[str, Any], inputs: Callable[[str], Any], changed: Iterable[str] = ()
) -> dict[str, str]:
    """{section: why it no longer describes the folder}: a stamped section whose inputs differ
    now, or an unstamped one (an older cafe's) derived from an input in ``changed``."""
    changed = set(changed)
    out: dict[str, str] = {}
    for name in metrics:
        value = metrics[name]
        if not isinstance(value, dict):
            continue
        was = value.get(STAMP)
        if not isinstance(was, dict):
            hit = sorted(record_inputs(name) & changed)
            if hit:
                out[name] = f"written before cafe stamped its inputs; the {hit[0]} changed since"
            continue
        now = stamp(name, metrics, inputs)
        for key in sorted(set(was) | set(now)):
            if was.get(key) != now.get(key):
                out[name] = _why(key, was.get(key), now.get(key))
                break
    return out


def _why(key: str, was: Any, now: Any) -> str:
    what = key.removeprefix("section:")
    if isinstance(was, dict) and isinstance(now, dict) and key in RECORD_INPUTS:
        if was.get("records") != now.get("records"):
            n_was, n_now = was.get("records"), now.get("records")
            return f"computed on {n_was} {what}; the folder now holds {n_now}"
        return f"computed on other {what} (they changed since: resumed, retried or re-judged)"
    return f"its input {what} changed since it was computed"


def _builtin(name: str, owner: str, derives: tuple[str, ...], up=(), down=()) -> None:
    register_section(SectionInfo(name, owner, derives, tuple(up), tuple(down)))


_builtin("accuracy", "cafe run", ("predictions",), up=("acc", "parse_rate"))
_builtin("official", "cafe run / cafe judge-official", ("predictions",), up=("acc",))
_builtin(
    "cafe", "cafe judge", ("judgements",), up=("acc_per",), down=("err_per", "err_use", "err_omit")
)
_builtin("decay", "cafe judge / cafe decay", ("predictions", "judgements"))
_builtin("judged_accuracy", "cafe judge-accuracy", ("predictions",), up=("acc",))
_builtin("rubric", "cafe rubric", ("predictions",), up=("score",))
_builtin("cues", "cafe cues", ("predictions", "judgements"), up=("recall",))
_builtin("listening", "cafe listen", ("predictions",), up=("gap",))
