"""perf/layers.py's counters (issue 34): import cycles as strongly connected components of the
module graph, imports inside functions and relative imports included, and the functions over
80 lines; on small packages written here, with the expected answers worked out by hand."""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _layers():
    path = ROOT / "perf" / "layers.py"
    spec = importlib.util.spec_from_file_location("layers", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _package(root: Path, files: dict[str, str]) -> Path:
    pkg = root / "pkg"
    for rel, text in files.items():
        p = pkg / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return pkg


def test_cycles_count_function_level_and_relative_imports(tmp_path: Path) -> None:
    layers = _layers()
    pkg = _package(
        tmp_path,
        {
            "__init__.py": "from pkg.a import x\n",
            # a -> b at the top, b -> a inside a function: one cycle of two
            "a.py": "from pkg import b\nx = 1\n",
            "b.py": "def f():\n    from pkg.a import x\n    return x\n",
            # c -> sub.d (relative), sub.d -> c (relative, two dots): a second cycle
            "c.py": "from .sub import d\n",
            "sub/__init__.py": "",
            "sub/d.py": "from .. import c\n",
            # e imports a only: on no cycle; f imports a name of a module that is ours
            "e.py": "import pkg.a\n",
            "f.py": "from pkg.sub.d import nothing\n",
        },
    )
    graph = layers.import_graph(layers.modules(pkg))
    assert graph["pkg.b"] == {"pkg.a"}
    assert graph["pkg.c"] == {"pkg.sub.d"}
    assert graph["pkg.sub.d"] == {"pkg.c"}
    assert graph["pkg.f"] == {"pkg.sub.d"}
    assert graph["pkg"] == {"pkg.a"}  # the package's __init__ is a module of its own
    assert layers.cycles(graph) == [["pkg.a", "pkg.b"], ["pkg.c", "pkg.sub.d"]]


def test_three_module_cycle_is_one_component(tmp_path: Path) -> None:
    layers = _layers()
    graph = {"p.a": {"p.b"}, "p.b": {"p.c"}, "p.c": {"p.a", "p.d"}, "p.d": set()}
    assert layers.cycles(graph) == [["p.a", "p.b", "p.c"]]
    assert layers.cycles({"p.a": {"p.b"}, "p.b": set()}) == []


def test_the_script_names_long_functions_and_cycles(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(85))
    pkg = _package(
        tmp_path,
        {
            "__init__.py": "",
            "long.py": f"def long_one():\n{body}\n    return 0\n\n\ndef short():\n    return 1\n",
            "a.py": "def f():\n    import pkg.b\n",
            "b.py": "import pkg.a\n\n\ndef __getattr__(name):\n    raise AttributeError(name)\n",
        },
    )
    out = subprocess.run(
        [sys.executable, str(ROOT / "perf" / "layers.py"), str(pkg)],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout  # fmt: skip
    assert "functions over 80 lines: 1\n  87 lines pkg/long.py:long_one\n" in out
    assert (
        "import cycles (strongly connected components, imports inside functions counted): 1\n"
        in out
    )
    assert "  2 modules: pkg.a pkg.b" in out
    assert "module-level __getattr__: 1\n  pkg/b.py\n" in out
    tree = ast.parse((pkg / "long.py").read_text())
    assert tree.body[0].end_lineno - tree.body[0].lineno + 1 == 87  # def + 85 + return
