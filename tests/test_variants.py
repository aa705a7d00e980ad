"""Variant runs in one place (cafe.steps.variants): each protocol's runs beside a run keep the
folder names of before, an --ids run's variants take the same items, a finished variant is
reused (no model loads), and the runner changes items only through its registered sample
transforms (cafe.controls), importing no robustness code."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from cafe.records import Sample
from cafe.runner.cli import run_command
from cafe.steps.cli import listen_command
from cafe.steps.variants import Variant, run_variants
from cafe.store import CONTROL_CAPTIONS, RunStore

CAFE = Path(__file__).resolve().parents[1] / "cafe"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))


def _item(i: int) -> Sample:
    return Sample(f"s{i}", "t", "v", "q?", ["a", "b", "c"], "b", [f"/x/{i}.wav"])


def test_each_protocol_names_its_folders_as_before(tmp_path):
    from cafe.robustness.steps import budget_variants, necessity_variants, ordering_variants
    from cafe.steps.listening import listening_variants

    real = tmp_path / "runs" / "m-synth-v2"
    assert [v.folder(real).name for v in listening_variants(real, ["silence", "noise"], 0,
                                                            None, {})] == [
        "m-synth-v2-ctl-silence", "m-synth-v2-ctl-noise"]  # fmt: skip
    assert [v.folder(real).name for v in necessity_variants(None)] == [
        "m-synth-v2-ctl-caption", "m-synth-v2-ctl-text-only", "m-synth-v2-ctl-silence"]  # fmt: skip
    orderings = ordering_variants([_item(0)], 3, "rotate", 0)
    assert [v.folder(real).name for v in orderings] == [
        "m-synth-v2-perm-rotate1of3", "m-synth-v2-perm-rotate2of3"]  # fmt: skip
    assert orderings[1].changes == {"permutation": {"k": 2, "of": 3, "mode": "rotate", "seed": 0}}
    sweep = budget_variants([0, 64], "budget forcing")
    assert [v.folder(tmp_path / "sw") for v in sweep] == [
        tmp_path / "sw" / "budget-0", tmp_path / "sw" / "budget-64"]  # fmt: skip
    assert sweep[1].changes == {"options": {"reasoning_budget": 64}}


def test_the_runner_applies_selections_before_what_is_shown():
    from cafe.controls import transform_samples

    pool = [_item(i) for i in range(4)]
    request = SimpleNamespace(ids=None, control="text-only", control_seed=3, permutation=None)
    shown, identity = transform_samples(request, pool[:2], pool)
    assert [s.id for s in shown] == ["s0", "s1"] and all(s.audio == [] for s in shown)
    assert identity == {"control": {"name": "text-only", "seed": 3}}
    # ordering 0 is the original order: the items as they are, nothing in the identity
    request = SimpleNamespace(permutation={"k": 0, "of": 2, "mode": "rotate", "seed": 0})
    assert transform_samples(request, pool, pool) == (pool, {})


def test_an_ids_runs_controls_take_its_items_and_a_finished_variant_is_reused(tmp_path, cache):
    ids = tmp_path / "ids.txt"
    ids.write_text("synth-00004\nsynth-00002\n")
    out = tmp_path / "r"
    args = ["--version", "n10-seed0", "--ids", str(ids), "--judge", "none", "--no-progress"]
    res = CliRunner().invoke(run_command, [*args, "--out", str(out)])
    assert res.exit_code == 0, res.output
    ids.unlink()  # the folder keeps its items: the controls need not the file
    res = CliRunner().invoke(listen_command, [str(out), "--controls", "silence", "--judge",
                                              "none", "--no-progress"])  # fmt: skip
    assert res.exit_code == 0, res.output
    ctl = tmp_path / "r-ctl-silence"
    got = [json.loads(x)["id"] for x in (ctl / "samples.jsonl").read_text().splitlines()]
    assert got == ["synth-00002", "synth-00004"]
    spec = json.loads((ctl / "manifest.json").read_text())["spec"]
    assert spec["ids"]["n"] == 2 and spec["control"] == {"name": "silence", "seed": 0}
    loaded = []
    silence = Variant("silence", "ctl-silence", {"control": "silence"})
    again = run_variants(out, [silence], progress=False,
                         after=lambda v, r: loaded.append(r.model_loaded))  # fmt: skip
    assert again == {"silence": ctl} and loaded == [False]


def test_the_runner_imports_no_robustness_code():
    for path in sorted((CAFE / "runner").glob("*.py")):
        if path.name == "cli.py":  # the command layer runs the protocols after a run
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                assert not (node.module or "").startswith("cafe.robustness"), path.name
    assert not (CAFE / "listen.py").exists()


def test_a_step_declares_its_variant_runs_and_the_engine_makes_them_once(tmp_path, cache):
    from cafe.folder.view import View
    from cafe.steps.base import Section
    from cafe.steps.engine import run_step
    from cafe.steps.variants import VariantStep

    seen: list[dict[str, View]] = []

    class Beside(VariantStep):
        name, writes = "beside", Section("beside")
        variants = staticmethod(lambda ctx: [Variant(
            "quiet", "ctl-silence", {"control": "silence"},
            files={CONTROL_CAPTIONS: str(len(ctx.view.samples))})])  # fmt: skip

        def section(self, ctx, records):
            seen.append(dict(ctx.variants))
            return {"n": {k: len(v.predictions) for k, v in ctx.variants.items()}}

    out = tmp_path / "r"
    res = CliRunner().invoke(run_command, ["--version", "n10-seed0", "--limit", "3", "--judge",
                                           "none", "--no-progress", "--out", str(out)])  # fmt: skip
    assert res.exit_code == 0, res.output
    loaded = []
    runs = {"progress": False, "after": lambda v, r: loaded.append(r.model_loaded)}
    assert run_step(Beside(), out, runs=runs).section["n"] == {"quiet": 3}
    view = seen[0]["quiet"]  # handed read: the variant's folder, its spec the run's + silence
    assert view.root == tmp_path / "r-ctl-silence"
    assert view.manifest["spec"]["control"] == {"name": "silence", "seed": 0}
    assert [s.id for s in view.samples] == [s.id for s in RunStore(out).samples()]
    # its file, written in its folder before its run (which takes the folder as its own)
    assert (view.root / CONTROL_CAPTIONS).read_text() == "3"
    run_step(Beside(), out, runs=runs)  # again: the finished variant is reused, no model loaded
    assert loaded == [True, False] and len(seen) == 2
