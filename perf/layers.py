"""Layer figures of the cafe package (issue 27): modules importing click outside the command
line layer, judge/metric modules that open run folders, the places that write metrics.json
sections, modules that spell a run-folder file name, and the longest functions.

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


if __name__ == "__main__":
    main()
