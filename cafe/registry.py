"""One generic registry (after lm-evaluation-harness's lm_eval/api/registry.py): entries come from
a decorator, from lazy "module:attr" strings (so heavy modules import only when used) and from an
entry-point group, and an unknown name fails with a "did you mean" hint. A registry typed by its
base class refuses an entry that is not one, in one line naming the entry and the base."""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Generic, TypeVar

from cafe.errors import CafeError

T = TypeVar("T")


class UnknownNameError(CafeError, KeyError):
    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0])


class EntryImportError(CafeError, ImportError):
    """A registered entry whose module cannot be imported: names the module and the missing
    package (or the error inside the module), instead of a later "unknown"/"no adapter" line."""


def import_failure(kind: str, name: str, module: str, e: BaseException) -> EntryImportError:
    if isinstance(e, ModuleNotFoundError) and e.name and not module.startswith(e.name + "."):
        why = f"missing package {e.name!r}; install it (or the extra that provides it)"
    else:
        where = ""
        tb = e.__traceback__
        while tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
        if tb is not None:
            where = f" at {tb.tb_frame.f_code.co_filename}:{tb.tb_lineno}"
        why = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}{where}"
    return EntryImportError(f"{kind} {name!r}: cannot import module {module} ({why})")


class RegistryTypeError(CafeError, TypeError):
    """An entry that is not of the registry's base class."""


def _qualname(obj: object) -> str:
    return f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', repr(obj))}"


class Registry(Generic[T]):
    """``base``: classes registered must subclass it (instances and functions must be instances
    of it: pass ``collections.abc.Callable`` for a registry of functions)."""

    def __init__(self, kind: str, entry_point_group: str | None = None, base: type | None = None):
        self.kind = kind
        self.group = entry_point_group
        self.base = base
        self._objects: dict[str, T] = {}
        self._lazy: dict[str, str] = {}
        self._entry_points_loaded = False

    def register(self, name: str, *aliases: str) -> Callable[[T], T]:
        def deco(obj: T) -> T:
            for n in (name, *aliases):
                self.add(n, obj)
            return obj

        return deco

    def check(self, name: str, obj: object) -> None:
        """Raise RegistryTypeError unless ``obj`` is of the registry's base class."""
        base = self.base
        if base is None:
            return
        ok = issubclass(obj, base) if isinstance(obj, type) else isinstance(obj, base)
        if not ok:
            what = "a subclass of" if isinstance(obj, type) else "an instance of"
            raise RegistryTypeError(
                f"{self.kind} {name!r}: {_qualname(obj)} is not {what} {_qualname(base)}"
            )

    def add(self, name: str, obj: T) -> None:
        self.check(name, obj)
        existing = self._objects.get(name)
        if existing is not None and existing is not obj:
            raise ValueError(f"{self.kind} {name!r} is registered twice")
        self._objects[name] = obj
        self._lazy.pop(name, None)

    def add_lazy(self, name: str, target: str) -> None:
        """Register "package.module:attr", imported on first get()."""
        if name not in self._objects:
            self._lazy[name] = target

    def _load_entry_points(self) -> None:
        if self._entry_points_loaded or not self.group:
            return
        self._entry_points_loaded = True
        for ep in entry_points(group=self.group):
            if ep.name not in self._objects and ep.name not in self._lazy:
                self._lazy[ep.name] = ep.value

    def names(self) -> list[str]:
        self._load_entry_points()
        return sorted(set(self._objects) | set(self._lazy))

    def __contains__(self, name: str) -> bool:
        return name in self.names()

    def get(self, name: str) -> T:
        self._load_entry_points()
        if name in self._objects:
            return self._objects[name]
        if name in self._lazy:
            module, _, attr = self._lazy[name].partition(":")
            try:
                obj = getattr(importlib.import_module(module), attr)
            except Exception as e:  # a broken or unmet module: say which and why, once
                raise import_failure(self.kind, name, module, e) from e
            self.check(name, obj)
            # importing may have registered it already (decorator in the module): keep that one
            self._lazy.pop(name, None)
            return self._objects.setdefault(name, obj)
        # case-insensitive ("MMAR" -> mmar): names are lower-case, users type them as published
        folded = {n.lower(): n for n in self.names()}
        matches = difflib.get_close_matches(name.lower(), folded, n=3, cutoff=0.5)
        close = [folded[c] for c in matches]
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise UnknownNameError(
            f"unknown {self.kind} {name!r}{hint} (known: {', '.join(self.names()) or 'none'})"
        )
