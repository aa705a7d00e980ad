"""Layer figures of the cafe package (issues 27, 34): modules importing click outside the
command line layer, judge/metric modules that open run folders, the places that write
metrics.json sections, modules that spell a run-folder file name, the functions over
MAX_LINES lines, the module-level ``__getattr__`` (second names for an import path, unless a
lazy import of a heavy dependency), the import cycles, the imports that point upward against the
layer order declared once here (``LAYERS``, issue 42), the Step protocol's size, and the lines of
the layer after the run (``FRAME``: the step engine, its steps, the judges and the one caller).

Import cycles are the strongly connected components (of more than one module) of the module
import graph: every ``import`` / ``from … import`` anywhere in a module (inside functions too),
relative imports resolved; a package's __init__ is a module of its own. ``import a.b`` and
``from a import b`` are an edge to ``a.b`` when that is a module of the package, else to ``a``
(the parent packages a dotted import also runs are not counted: every module would then reach
cafe/__init__).

    python perf/layers.py [PACKAGE_DIR]     # default: this checkout's cafe/
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

#: the command-line layer: click belongs here
CLI_LAYER = re.compile(r"(^|/)(cli|cli_options)\.py$")
#: the store's file names (cafe.store): spelled anywhere else is a second owner of the name
FILE_NAMES = ("predictions.jsonl", "judgements.jsonl", "metrics.json", "manifest.json",
              "samples.jsonl")  # fmt: skip


#: the longest a function may be (issue 34)
MAX_LINES = 80

#: the package's layers, lowest first (issue 42): a module may import its own layer and those
#: below it; an import of a higher layer points upward. Names are cafe's top-level modules and
#: subpackages; every ``cli.py`` (and cli_options, commands, api) is the command layer, on top.
LAYERS: tuple[tuple[str, str], ...] = (
    ("core", "errors jsontext redaction safe_files registry records locking counters reporting "
             "audio cache parsing prompts plotting synth_vocabulary"),
    ("testing", "testing"),  # loopback servers and tiny models: they import no cafe code
    ("folder", "store folder manifest failures"),
    ("clients", "clients"),
    ("execution", "execution caller"),
    ("models", "adapters cluster"),
    ("benchmarks", "benchmarks"),
    ("judging", "judge metrics controls"),
    ("runner", "runner"),
    ("steps", "steps robustness"),
    ("reports", "reports"),
    ("training", "training"),
    ("commands", "cli_options commands api cli"),
)  # fmt: skip
#: the Step protocol (issue 42): the class, the judging step whose hooks are counted, the hooks
STEP, JUDGE_STEP = ("cafe/steps/base.py", "Step"), ("cafe/steps/cafe_judge.py", "CafeJudgeStep")
#: the layer after the run (issue 42 counts it, with the caller it asked for): files and folders
#: under the package root, every line (``wc -l``)
FRAME = ("steps", "judge", "execution.py", "caller.py", "robustness/steps.py")


def modules(root: Path) -> list[tuple[str, ast.Module, str]]:
    out = []
    for p in sorted(root.rglob("*.py")):
        rel = str(p.relative_to(root.parent))
        text = p.read_text(encoding="utf-8")
        out.append((rel, ast.parse(text), text))
    return out


def imports_click(tree: ast.Module) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(
            a.name.split(".")[0] == "click" for a in node.names
        ):
            return True
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "click":
            return True
    return False


def calls(tree: ast.Module, names: tuple[str, ...]) -> int:
    n = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
            n += name in names
    return n


def module_name(rel: str) -> str:
    """cafe/runner/main.py -> cafe.runner.main; cafe/runner/__init__.py -> cafe.runner."""
    parts = rel[: -len(".py")].split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(name: str, is_package: bool, tree: ast.Module, known: set[str]) -> set[str]:
    """The package's modules that module ``name`` imports anywhere in its body."""
    out: set[str] = set()
    package = name if is_package else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package, one level up per extra dot
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, *([base] if base else [])])
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base
                       for a in node.names]  # fmt: skip
        else:
            continue
        for t in targets:
            while t and t not in known:  # import a.b.c where only a.b is ours: a.b
                t = t.rpartition(".")[0]
            if t and t != name:
                out.add(t)
    return out


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return sorted(found, key=lambda c: (-len(c), c))


def import_graph(mods: list[tuple[str, ast.Module, str]]) -> dict[str, set[str]]:
    names = {module_name(m): (m, t) for m, t, _ in mods}
    known = set(names)
    return {n: imported(n, m.endswith("__init__.py"), t, known) for n, (m, t) in names.items()}


def layer_of(module: str) -> int:
    """The index in LAYERS of a module (cafe.x.y -> x's layer; every cli module: the top)."""
    parts = module.split(".")
    if len(parts) == 1:  # cafe/__init__.py: the version, importing nothing
        return 0
    if parts[-1] in ("cli", "cli_options"):
        return len(LAYERS) - 1
    for i, (_, names) in enumerate(LAYERS):
        if parts[1] in names.split():
            return i
    raise SystemExit(f"perf/layers.py: {module} is in no layer of LAYERS: declare it there")


def upward(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """The imports (module -> module) from a lower layer to a higher one (cafe's modules only:
    LAYERS declares cafe's floors, another package given on the command line has none)."""
    ours = {a: {b for b in bs if b.split(".")[0] == "cafe"} for a, bs in graph.items()
            if a.split(".")[0] == "cafe"}  # fmt: skip
    return sorted((a, b) for a, bs in ours.items() for b in bs if layer_of(a) < layer_of(b))


def _classes(mods: list[tuple[str, ast.Module, str]]) -> dict[str, tuple[str, ast.ClassDef]]:
    out = {}
    for m, t, _ in mods:
        for node in t.body:
            if isinstance(node, ast.ClassDef):
                out.setdefault(node.name, (m, node))
    return out


def lineage(classes: dict[str, tuple[str, ast.ClassDef]], name: str, stop: str | None = None
            ) -> list[ast.ClassDef]:  # fmt: skip
    """The class and its bases defined in the package, depth first (up to ``stop`` included)."""
    out: list[ast.ClassDef] = []
    todo = [name]
    while todo:
        n = todo.pop(0)
        if n not in classes or any(c.name == n for c in out):
            continue
        cls = classes[n][1]
        out.append(cls)
        if n != stop:
            todo += [b.id if isinstance(b, ast.Name) else getattr(b, "attr", "")
                     for b in cls.bases]  # fmt: skip
    return out


def members(cls: ast.ClassDef) -> tuple[set[str], set[str]]:
    """(methods, class attributes) a class body defines."""
    methods, attrs = set(), set()
    for node in cls.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            methods.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            attrs.add(node.target.id)
        elif isinstance(node, ast.Assign):
            attrs |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return methods, attrs


def self_assignments(cls: ast.ClassDef) -> int:
    """Assignments to ``self.x`` inside a class's methods other than ``__init__``."""
    n = 0
    for f in cls.body:
        if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef) and f.name != "__init__":
            for node in ast.walk(f):
                targets = (node.targets if isinstance(node, ast.Assign)
                           else [node.target] if isinstance(node, ast.AugAssign | ast.AnnAssign)
                           else [])  # fmt: skip
                n += sum(isinstance(t, ast.Attribute) and getattr(t.value, "id", "") == "self"
                         for t in targets)  # fmt: skip
    return n


def step_size(mods: list[tuple[str, ast.Module, str]]) -> dict[str, int]:
    """The Step protocol's size: Step's methods and class attributes with everything it
    inherits, the hooks CafeJudgeStep defines with its bases up to Step, and the assignments
    to ``self`` inside the hooks of every class deriving from Step."""
    classes = _classes(mods)
    step = lineage(classes, STEP[1])
    methods = set().union(*(members(c)[0] for c in step)) if step else set()
    attrs = set().union(*(members(c)[1] for c in step)) if step else set()
    judge = [c for c in lineage(classes, JUDGE_STEP[1], STEP[1]) if c.name != STEP[1]]
    hooks = set().union(*(members(c)[0] - {"__init__"} for c in judge)) if judge else set()
    derived = [c for n, (_, c) in classes.items() if STEP[1] in
               {x.name for x in lineage(classes, n)} and n != STEP[1]]  # fmt: skip
    return {"methods": len(methods), "attributes": len(attrs), "judge_hooks": len(hooks),
            "self_assignments": sum(self_assignments(c) for c in derived)}  # fmt: skip


def _module_getattr(tree: ast.Module) -> bool:
    return any(isinstance(n, ast.FunctionDef) and n.name == "__getattr__" for n in tree.body)


def frame_lines(root: Path) -> dict[str, int]:
    """``wc -l`` of each FRAME entry (a folder: its own .py files, not its subfolders)."""
    out = {}
    for entry in FRAME:
        path = root / entry
        files = sorted(path.glob("*.py")) if path.is_dir() else [path]
        out[entry] = sum(len(f.read_text().splitlines()) for f in files if f.is_file())
    return out


def main() -> None:
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1] / "cafe"
    mods = modules(root)
    click_mods = [m for m, t, _ in mods if imports_click(t) and not CLI_LAYER.search(m)]
    opens = [m for m, t, _ in mods if re.match(r"cafe/(judge|metrics)/", m)
             and calls(t, ("RunStore",))]  # fmt: skip
    writers = {m: calls(t, ("update_metrics", "write_section")) for m, t, _ in mods}
    writers = {m: n for m, n in writers.items() if n and not m.endswith("cafe/store.py")}
    spelled = [m for m, _, text in mods if not m.endswith("cafe/store.py")
               and any(f'"{f}"' in text for f in FILE_NAMES)]  # fmt: skip
    funcs = []
    for m, t, _ in mods:
        for node in ast.walk(t):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                funcs.append((node.end_lineno - node.lineno + 1, f"{m}:{node.name}"))
    funcs.sort(reverse=True)
    long = [(n, w) for n, w in funcs if n > MAX_LINES]
    getattrs = [m for m, t, _ in mods if _module_getattr(t)]
    graph = import_graph(mods)
    found = cycles(graph)
    up = upward(graph)
    size = step_size(mods)
    print(f"modules importing click outside the CLI layer: {len(click_mods)}")
    print("  " + " ".join(click_mods))
    print(f"judge/metric modules that open run folders: {len(opens)}")
    print("  " + " ".join(opens))
    print(f"places writing metrics sections: {sum(writers.values())} calls in {len(writers)} "
          "modules")  # fmt: skip
    print("  " + " ".join(f"{m}({n})" for m, n in sorted(writers.items())))
    print(f"modules spelling a run-folder file name: {len(spelled)}")
    print("  " + " ".join(spelled))
    print("longest functions: " + ", ".join(f"{n} lines {w}" for n, w in funcs[:3]))
    print(f"functions over {MAX_LINES} lines: {len(long)}")
    for n, w in long:
        print(f"  {n} lines {w}")
    print(f"module-level __getattr__: {len(getattrs)}")
    print("  " + " ".join(getattrs))
    print(f"import cycles (strongly connected components, imports inside functions counted): "
          f"{len(found)}")  # fmt: skip
    for comp in found:
        print(f"  {len(comp)} modules: " + " ".join(comp))
    print(f"imports pointing upward (against LAYERS): {len(up)}")
    for a, b in up:
        print(f"  {a} ({LAYERS[layer_of(a)][0]}) -> {b} ({LAYERS[layer_of(b)][0]})")
    print(f"Step protocol: {size['methods']} methods, {size['attributes']} class attributes "
          f"(with what it inherits); {JUDGE_STEP[1]} defines {size['judge_hooks']} hooks up to "
          f"Step; {size['self_assignments']} assignments to self in steps' hooks")  # fmt: skip
    frame = frame_lines(root)
    print(f"lines after the run: {sum(frame.values())} "
          f"({', '.join(f'{k} {n}' for k, n in frame.items())})")  # fmt: skip


if __name__ == "__main__":
    main()
