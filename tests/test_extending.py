"""docs/extending.md's examples, run as written: the code blocks are read out of the page, so
the guide cannot drift from what works. A benchmark, an adapter, a judge and a metric from
"another package" go through the real runner, judge pipeline and report."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from cafe import api
from cafe.adapters.base import ADAPTERS
from cafe.audio import write_wav
from cafe.benchmarks.base import BENCHMARKS
from cafe.errors import CafeError
from cafe.judge import JUDGES
from cafe.metrics import METRICS
from cafe.registry import Registry, RegistryTypeError
from cafe.steps.plugins import compute_metrics

DOC = Path(__file__).resolve().parents[1] / "docs" / "extending.md"
EXAMPLE = re.compile(r"<!-- example: (\w+) -->\n```python\n(.*?)```", re.S)


def examples() -> dict[str, str]:
    return dict(EXAMPLE.findall(DOC.read_text(encoding="utf-8")))


@pytest.fixture
def scoped(monkeypatch: pytest.MonkeyPatch):
    """The registries as they are now, restored after the test (the examples register)."""
    for reg in (ADAPTERS, BENCHMARKS, JUDGES, METRICS):
        monkeypatch.setattr(reg, "_objects", dict(reg._objects))
        monkeypatch.setattr(reg, "_lazy", dict(reg._lazy))
    yield


def load_example(name: str, tmp_path: Path) -> None:
    path = tmp_path / f"extending_{name}.py"
    path.write_text(examples()[name], encoding="utf-8")
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(path.stem, None)


def beep_clip(path: Path, starts: list[float]) -> None:
    """0.6 s at 16 kHz: a 50 ms 1 kHz beep at each start time, silence between."""
    t = np.arange(int(0.6 * 16000)) / 16000
    x = np.zeros_like(t)
    for s in starts:
        on = (t >= s) & (t < s + 0.05)
        x[on] = 0.5 * np.sin(2 * np.pi * 1000 * t[on])
    write_wav(path, x.astype(np.float32))


def beeps_folder(root: Path) -> Path:
    (root / "audio").mkdir(parents=True)
    beep_clip(root / "audio" / "one.wav", [0.1])
    beep_clip(root / "audio" / "three.wav", [0.05, 0.25, 0.45])
    # two beeps 5 ms apart: the counter's 10 ms envelope hears one
    beep_clip(root / "audio" / "close.wav", [0.1, 0.155])
    rows = [
        {"id": "b1", "audio": "audio/one.wav", "beeps": 1},
        {"id": "b3", "audio": "audio/three.wav", "beeps": 3},
        {"id": "b2", "audio": "audio/close.wav", "beeps": 2},
        {"id": "bad", "audio": "audio/one.wav", "beeps": "one"},
    ]
    (root / "items.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root


def test_the_page_has_the_four_examples() -> None:
    assert set(examples()) == {"benchmark", "adapter", "judge", "metric", "step"}


def test_the_four_examples_run_together(tmp_path: Path, scoped, monkeypatch) -> None:
    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    for name in ("benchmark", "adapter", "judge", "metric"):
        load_example(name, tmp_path)
    data = beeps_folder(tmp_path / "beeps")
    res = api.run(
        "beep-counter", "beeps", data=str(data), out=tmp_path / "run", judge="beep-count",
        progress=False,
    )  # fmt: skip
    # the bad line is a problem naming file, id and field; the other three run
    assert [str(p) for p in res.problems] == [
        f"{data / 'items.jsonl'}: sample bad: field beeps: not an integer"
    ]
    acc = res.metrics["accuracy"]
    assert acc["total"] == {"correct": 2, "total": 3, "acc": 66.67}  # "close" heard as 1
    assert acc["breakdowns"]["beeps"]["2"] == {"correct": 0, "total": 1, "acc": 0.0}
    metrics = json.loads((res.run_dir / "metrics.json").read_text())
    cafe = metrics["cafe"]
    # b1, b3 matched; b2 states "1 beeps": 1 hallucinated, "2 beeps" missed
    # N_pred = 2 + 1 = 3, N_tgt = 2 + 1 = 3
    assert cafe["acc_per"] == pytest.approx(100 * 2 / 3)
    assert cafe["err_per"] == pytest.approx(100 * 1 / 3)
    assert cafe["err_omit"] == pytest.approx(100 * 1 / 3)
    assert cafe["judge"]["judge"] == "beep-count-v1"
    # "<think>I hear N beeps.</think><answer>N</answer>" is 7 + 15 + 8 + 8 + 1 + 9 = 48 chars
    stamp = metrics["answer_length"].pop("inputs")  # what it was computed from
    assert metrics["answer_length"] == {"mean_chars": 48.0, "n": 3}
    assert stamp["predictions"]["records"] == 3 and stamp["judgements"]["records"] == 3

    # cafe report recomputes the metric (here: after its section was lost) and lists it
    del metrics["answer_length"]
    (res.run_dir / "metrics.json").write_text(json.dumps(metrics))
    folder = api.report(res.run_dir, draw=False)
    again = json.loads((res.run_dir / "metrics.json").read_text())
    assert again["answer_length"]["mean_chars"] == 48.0 and again["answer_length"]["n"] == 3
    summary = (folder / "summary.md").read_text()
    assert "## answer_length" in summary and "| mean_chars | 48.00 |" in summary


def test_a_failing_metric_writes_its_error_and_the_others_run(tmp_path: Path, scoped) -> None:
    load_example("metric", tmp_path)
    res = api.run("reference", "synth", version="n4-seed0", out=tmp_path / "r", progress=False,
                  judge="none")  # fmt: skip

    @METRICS.register("broken")
    def broken(run):
        return {"x": 1 / 0}

    out = compute_metrics(res.run_dir)
    assert out["broken"] == {"error": "ZeroDivisionError: division by zero"}
    assert out["answer_length"]["n"] == 4
    written = json.loads((res.run_dir / "metrics.json").read_text())
    assert written["broken"]["error"] == out["broken"]["error"] and "accuracy" in written
    assert written["broken"]["inputs"]["predictions"]["records"] == 4  # stamped with its inputs

    # a built-in section's name is refused when registered, before it could overwrite one
    for builtin in ("accuracy", "judged_accuracy", "official", "rubric", "cues", "listening"):
        with pytest.raises(CafeError, match=f"section '{builtin}' is cafe's own"):

            @METRICS.register(builtin)
            def shadow(run):
                return {}

    assert "accuracy" not in METRICS.names()


def test_registries_are_typed_by_their_base_class(scoped) -> None:
    class NotAnAdapter:
        pass

    with pytest.raises(RegistryTypeError) as e:
        ADAPTERS.add("not-one", NotAnAdapter)
    assert str(e.value) == (
        f"adapter 'not-one': {__name__}.test_registries_are_typed_by_their_base_class.<locals>."
        "NotAnAdapter is not a subclass of cafe.adapters.base.Adapter"
    )
    with pytest.raises(RegistryTypeError, match="is not an instance of"):
        METRICS.add("not-callable", 42)  # type: ignore[arg-type]
    # a lazy entry is checked when it is first imported
    BENCHMARKS.add_lazy("json-dumps", "json:dumps")
    with pytest.raises(RegistryTypeError, match="benchmark 'json-dumps': json.dumps is not"):
        BENCHMARKS.get("json-dumps")
    # untyped registries take anything, as before
    Registry("thing").add("n", 1)


def test_a_judging_protocol_is_one_module(tmp_path: Path, monkeypatch, scoped) -> None:
    """docs/extending.md's step: registered, it runs as `cafe hedging` and through cafe.api,
    resumes from its records, replays from the cache, and redoes records under another spec."""
    from click.testing import CliRunner

    from cafe.cli import main
    from cafe.steps import STEPS
    from cafe.testing.loopback import OpenAILoopback

    monkeypatch.setattr(STEPS, "_objects", dict(STEPS._objects))
    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    load_example("step", tmp_path)
    run = api.run("reference", "synth", version="n4-seed0", out=tmp_path / "r", progress=False,
                  judge="none").run_dir  # fmt: skip
    outputs = [json.loads(x)["raw_output"] for x in (run / "predictions.jsonl").open()]
    hedgy = outputs[0]  # the judge says the first output hedges, the others not

    def reply(body):
        return "YES" if hedgy in body["messages"][0]["content"] else "NO"

    with OpenAILoopback(reply=reply) as srv:
        monkeypatch.setenv("OPENAI_BASE_URL", srv.url)
        res = CliRunner().invoke(main, ["hedging", str(run), "--judge-model", "m", "--json"])
        assert res.exit_code == 0, res.output
        assert len(srv.requests) == 4
        sec = json.loads((run / "metrics.json").read_text())["hedging"]
        assert sec["hedging_rate"] == 25.0 and sec["judged"] == 4  # 1 of 4, by hand
        assert sec["outcome"] == {"status": "complete", "total": 4, "usable": 4}
        assert sec["spec"] == {"step": "hedging", "version": 1, "judge_model": "m"}
        # again: every record is there under this spec, nothing is asked
        again = api.run_step("hedging", run, judge_model="m")
        assert len(srv.requests) == 4 and again.section["counters"]["invocations"] == 2
        # killed after two records were written: the same command asks for the other two only
        # (here the cache holds them too, so it is asked for none)
        lines = (run / "hedging.jsonl").read_text().splitlines()
        (run / "hedging.jsonl").write_text("\n".join(lines[:2]) + "\n")
        resumed = api.run_step("hedging", run, judge_model="m")
        assert len(srv.requests) == 4
        assert resumed.section["counters"]["this_invocation"]["cache_hits"] == 2
        assert resumed.section["hedging_rate"] == 25.0
        # without the cache, only the two missing records are asked for
        (run / "hedging.jsonl").write_text("\n".join(lines[:2]) + "\n")
        api.run_step("hedging", run, judge_model="m", cache=tmp_path / "other.sqlite")
        assert len(srv.requests) == 6
        # another spec (judge model): its records are made anew, under new cache keys
        api.run_step("hedging", run, judge_model="m2")
        assert len(srv.requests) == 10 and srv.requests[-1]["model"] == "m2"
    # every reply unusable: exit 1, one line, the section left as it was
    with OpenAILoopback(reply=lambda body: "perhaps") as srv:
        monkeypatch.setenv("OPENAI_BASE_URL", srv.url)
        res = CliRunner().invoke(main, ["hedging", str(run), "--judge-model", "m3"])
    assert res.exit_code == 1
    assert res.output.strip().splitlines()[-1] == (
        f"Error: cafe hedging on {run} produced nothing usable: all 4 replies unusable; its "
        "section was not written"
    )
    assert json.loads((run / "metrics.json").read_text())["hedging"]["spec"]["judge_model"] == "m2"
