"""One of each (issue 34): one name per function (no module-level ``__getattr__`` forwarders in
the judge layer or cafe.metrics), one executor module the engine imports (not the judge
layer's), one sections module whose facts are declared once and say what the code computes, and
one read model of a run folder that steps, metrics and the folder table read through."""

from __future__ import annotations

import ast
import importlib.util
import json
from pathlib import Path

import pytest

import cafe
from cafe.folder.sections import record_inputs, section_info
from cafe.steps import STEPS, TABLE

CAFE = Path(cafe.__file__).parent


def _module_getattr(path: Path) -> bool:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return any(isinstance(n, ast.FunctionDef) and n.name == "__getattr__" for n in tree.body)


@pytest.mark.parametrize(
    "path", [*sorted((CAFE / "judge").glob("*.py")), CAFE / "metrics" / "__init__.py"],
    ids=lambda p: f"{p.parent.name}/{p.name}",
)  # fmt: skip
def test_the_judge_layer_and_metrics_have_no_second_names(path):
    assert not _module_getattr(path), f"{path} forwards names with a module-level __getattr__"


def test_the_dead_and_the_duplicate_modules_are_gone():
    for gone in ("cafe.judge.rubric_run", "cafe.metrics.sections"):
        assert importlib.util.find_spec(gone) is None, gone
    import cafe.judge.cues as cues
    import cafe.judge.pipeline as pipeline

    assert not hasattr(pipeline, "resume_judgements") and not hasattr(pipeline, "judge_run")
    assert not hasattr(cues, "cue_judgements_file")


def test_central_tables_name_real_homes():
    """Each target is defined in the module the table names (no re-export, no shim)."""
    from cafe import api

    targets = [e.target for e in TABLE] + list(api.TARGETS.values())
    for target in targets:
        module, _, attr = target.partition(":")
        fn = getattr(importlib.import_module(module), attr)
        assert getattr(fn, "__module__", module) == module, f"{target} lives in {fn.__module__}"


def test_the_engine_imports_its_executor_outside_the_judge_layer():
    tree = ast.parse((CAFE / "steps" / "engine.py").read_text(encoding="utf-8"))
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert "cafe.execution" in imported
    assert not {m for m in imported if m and m.startswith("cafe.judge")}, imported


def test_section_facts_are_declared_once_and_say_what_the_code_computes():
    # the CAFE section is computed from judgements (which derive from the predictions)
    assert section_info("cafe").derives_from == ("judgements",)
    assert record_inputs("cafe") == {"judgements", "predictions"}
    # judged_accuracy's figure is its total cell's "acc", read as the accuracy section's is
    assert section_info("judged_accuracy").direction("acc") == "up"
    assert section_info("judged_accuracy").direction("total") is None
    for entry in TABLE:
        if entry.engine:
            cls = type(STEPS.step(entry.command))
            for fact in ("derives_from", "higher_is_better", "lower_is_better"):
                assert fact not in vars(cls), f"{cls.__name__} declares {fact} a second time"


def test_the_folder_table_reads_through_the_store_and_names_a_damaged_file(tmp_path):
    from cafe.reports.folder import folder_table
    from cafe.store import RunStore

    good = RunStore(tmp_path / "runs" / "good").create()
    good.write_manifest({"model": {"name": "m1"}, "bench": {"name": "synth"}})
    good.update_metrics("accuracy", {"total": {"correct": 1, "total": 2, "acc": 50.0}})
    bad = RunStore(tmp_path / "runs" / "bad").create()
    bad.write_manifest({"model": {"name": "m2"}})
    bad.path("metrics.json").write_text(json.dumps([1, 2]), encoding="utf-8")
    table = folder_table(tmp_path / "runs")
    good_row = next(line for line in table.splitlines() if line.startswith("| good "))
    bad_row = next(line for line in table.splitlines() if line.startswith("| bad "))
    assert "| m1 | synth |" in good_row and "| 50.00 |" in good_row
    assert "damaged" in bad_row and "metrics.json" in bad_row
