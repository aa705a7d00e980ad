"""Sections that know where they come from (cafe.folder.sections): a reference run on 8 synth
items gets every step that runs offline (the rule judge, decay, judged accuracy through a
loopback judge, a listening control, a plugin metric) and two sections written as their
commands write them (rubric, cues: MMAR-only); `cafe run --limit 12` into the same folder then
leaves no section computed on the 8: each is recomputed on 12 or removed with a note saying why."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from cafe import api
from cafe.errors import CafeError
from cafe.folder.sections import SectionInfo, register_section, section_info, stale
from cafe.metrics import METRICS
from cafe.runner.cli import run_command
from cafe.store import RunStore
from cafe.testing.loopback import OpenAILoopback

SYNTH = ["--model", "reference", "--bench", "synth", "--version", "n12-seed0", "--no-progress"]


@pytest.fixture
def plugin(monkeypatch):
    """A plugin metric, registered for this test only."""
    monkeypatch.setattr(METRICS, "_objects", dict(METRICS._objects))

    def answered(run):
        return {"answered": sum(p.answer is not None for p in run.predictions)}

    METRICS.add("answered", answered)
    return answered


def _sections_on(folder: Path) -> dict[str, int | None]:
    """section -> how many predictions its stamp says it was computed on."""
    metrics = json.loads((folder / "metrics.json").read_text())
    return {
        name: (sec.get("inputs") or {}).get("predictions", {}).get("records")
        for name, sec in metrics.items()
    }


@pytest.mark.parametrize("judge", ["rule", "none"])
def test_extending_8_to_12_leaves_no_section_computed_on_8(tmp_path, monkeypatch, plugin, judge):
    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "run"
    res = CliRunner().invoke(run_command, [*SYNTH, "--limit", "8", "--out", str(out)])
    assert res.exit_code == 0, res.output
    api.decay(out)
    with OpenAILoopback(reply=lambda body: "A") as srv:
        api.judge_accuracy(out, "openai-compatible", "m", endpoints=[srv.url],
                           cache=tmp_path / "j.sqlite")  # fmt: skip
    api.listen(out, ["silence"], judge="none", progress=False)
    store = RunStore(out)
    store.update_metrics("rubric", {"score": 0.5})  # as `cafe rubric` writes it (MMAR only)
    store.update_metrics("cues", {"offline": {"recall": 0.4}})  # as `cafe cues` (MMAR only)
    before = _sections_on(out)
    expected = {"accuracy", "cafe", "decay", "judged_accuracy", "listening", "rubric", "cues",
                "answered"}  # fmt: skip
    assert expected <= set(before) and set(before.values()) == {8}, before

    res = CliRunner().invoke(
        run_command, [*SYNTH, "--limit", "12", "--out", str(out), "--judge", judge]
    )
    assert res.exit_code == 0, res.output
    after = _sections_on(out)
    assert 8 not in after.values(), after
    assert after["accuracy"] == 12
    # the rule judge computes cafe and decay again on the 12; with no judge they go
    if judge == "rule":
        assert after["cafe"] == after["decay"] == after["answered"] == 12
    else:
        assert not {"cafe", "decay", "answered"} & set(after)
    # the others go, each with one line saying why and which command computes it again
    for name in ("judged_accuracy", "listening", "rubric", "cues"):
        assert name not in after
        line = f"removed the {name} section of metrics.json: computed on 8 predictions; "
        assert line + "the folder now holds 12" in res.output, res.output
    assert "`cafe judge-accuracy` computes it again" in res.output


def test_the_same_run_again_keeps_every_section(tmp_path, monkeypatch):
    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "run"
    api.run("reference", "synth", version="n12-seed0", limit=8, out=out, progress=False)
    api.decay(out)
    first = json.loads((out / "metrics.json").read_text())
    again = api.run("reference", "synth", version="n12-seed0", limit=8, out=out, progress=False)
    assert not again.notes
    now = json.loads((out / "metrics.json").read_text())
    assert set(now) == set(first) == {"accuracy", "cafe", "decay"}  # nothing removed
    assert all(now[k]["inputs"] == first[k]["inputs"] for k in now)


def test_a_rejudged_folder_drops_what_the_old_judgements_fed(tmp_path):
    """A section derived from judgements only (a plugin's) goes when the judgements change."""
    store = RunStore(tmp_path).create()
    line = '{{"sample_id": "a", "run_index": 0, "judge": "{}", "template_hash": "h", '
    line += '"raw_reply": ""}}\n'
    store.path("judgements.jsonl").write_text(line.format("j"))
    register_section(SectionInfo("events_seen", "a plugin", ("judgements",), builtin=False))
    store.update_metrics("events_seen", {"n": 1})
    assert store.invalidate() == {}
    store.path("judgements.jsonl").write_text(line.format("k"))  # another judge
    assert store.invalidate() == {
        "events_seen": "computed on other judgements (they changed since: resumed, retried or "
        "re-judged)"
    }
    assert "events_seen" not in store.read_metrics()


def test_a_section_derived_from_another_goes_with_it():
    register_section(SectionInfo("cafe_delta", "a plugin", ("cafe",), builtin=False))
    metrics = {"cafe": {"acc_per": 50.0}}
    now = {
        "predictions": {"records": 1, "digest": "p"},
        "judgements": {"records": 1, "digest": "j"},
    }
    from cafe.folder.sections import stamp

    metrics["cafe_delta"] = {"d": 1, "inputs": stamp("cafe_delta", metrics, now.get)}
    assert stale(metrics, now.get) == {}
    metrics["cafe"] = {"acc_per": 60.0}
    assert stale(metrics, now.get) == {"cafe_delta": "its input cafe changed since it was computed"}


def test_a_plugin_cannot_take_a_builtin_name():
    with pytest.raises(CafeError, match="section 'judged_accuracy' is cafe's own"):
        register_section(SectionInfo("judged_accuracy", "a plugin", ("predictions",), False))
    assert section_info("judged_accuracy").owner == "cafe judge-accuracy"


def test_a_replayed_record_stamps_like_the_one_it_replays(tmp_path):
    """A prediction or judgement got from the cache on a resume (its counters' share says
    "cache hit") is the same record to every metric: the input stamp ignores the share, so an
    interrupted run's sections are not taken for stale; a changed output is."""
    from cafe.records import Judgement, Prediction

    def stamps(call: dict, output: str) -> tuple[dict, dict]:
        store = RunStore(tmp_path / f"run-{len(list(tmp_path.iterdir()))}").create()
        with store.writer("predictions.jsonl") as w:
            w.write_many([Prediction("a", 0, "m", "lalm", "h", output, latency_s=len(call),
                                     call=call)])  # fmt: skip
        with store.writer("judgements.jsonl") as w:
            w.write_many([Judgement("a", 0, "j", "h", "{}", status="ok", call=call)])
        return store.input_digest("predictions"), store.input_digest("judgements")

    made = stamps({"calls": 1}, "dog")
    assert stamps({"cache_hits": 1}, "dog") == made
    assert stamps({"calls": 1}, "cat")[0] != made[0]
