"""The newcomer's path, round two (issue 46): click errors that give the one-word form of an
option's value, and a run whose clips are missing says so once with where to get them."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from runner_helpers import HIGH, LOW, register, write_tone_bench

from cafe.cli import main
from cafe.runner.main import run_with

register()


@pytest.mark.parametrize(
    "argv,hint",
    [
        (["run", "--model", "random", "-o", "temperature", "0.7"],
         "-o takes KEY=VALUE as one word: -o temperature=0.7"),
        (["run", "--controls", "silence", "text-only"],
         "--controls takes a comma-separated list as one word: --controls silence,text-only"),
        (["sweep", "--budgets", "0", "8", "64"],
         "--budgets takes a comma-separated list as one word: --budgets 0,8,64"),
    ],
)  # fmt: skip
def test_a_value_written_as_two_words_gets_its_one_word_form(argv, hint) -> None:
    res = CliRunner().invoke(main, argv)
    assert res.exit_code == 2 and hint in res.output, res.output


def test_a_real_extra_argument_keeps_clicks_own_error() -> None:
    res = CliRunner().invoke(main, ["bench", "list", "stray"])
    assert res.exit_code == 2 and "unexpected extra argument (stray)" in res.output
    assert "one word" not in res.output


@pytest.mark.parametrize("model", ["random", "tone"])
def test_missing_clips_are_said_once_with_where_to_get_them(model, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    meta = write_tone_bench(tmp_path / "b", [HIGH, LOW] * 3)
    run_with(model, "tone", data=str(meta), out=tmp_path / "whole", progress=False, judge="none")
    assert "clips are missing" not in capsys.readouterr().err  # every clip there: no line
    for i in (0, 1, 4):
        (tmp_path / "b" / f"t{i}.wav").unlink()
    run_with(model, "tone", data=str(meta), out=tmp_path / "r", progress=False, judge="none")
    lines = [ln for ln in capsys.readouterr().err.splitlines() if "clips are missing" in ln]
    assert len(lines) == 1, lines
    assert "3 of 6 tone clips are missing" in lines[0] and "t0.wav" in lines[0]
    assert "docs/benchmarks.md" in lines[0]
    assert ("reads no audio" in lines[0]) == (model == "random")


def test_cafe_serves_the_tokenize_route_cafe_probes(tmp_path) -> None:
    """`cafe serve`'s llama.cpp command answers POST /tokenize (llama-cpp-python alone: 404, and
    the run warned and counted words): the served model's own tokens, no BOS added; and the
    client's probe reads the count from it."""
    pytest.importorskip("llama_cpp")
    import socket
    import subprocess
    import time
    from pathlib import Path

    import httpx

    from cafe.adapters.cards import load_cards
    from cafe.clients import make_client
    from cafe.cluster.servers import server_command
    from cafe.execution import run_sync

    card = load_cards([Path(__file__).parent / "data" / "cluster_cards.yaml"])["smollm2"]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    argv = server_command(card, None, None).for_address("127.0.0.1", port)
    log = tmp_path / "server.log"
    with log.open("wb") as f:
        proc = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT)
    root = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180  # a safety net for a hung start, not a timing claim
        while True:
            assert proc.poll() is None, log.read_text()[-3000:]
            try:
                if httpx.get(f"{root}/v1/models", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.2)

        def count(text: str, field: str) -> dict:
            r = httpx.post(f"{root}/tokenize", json={"model": "smollm2", field: text})
            assert r.status_code == 200, r.text
            return r.json()

        assert count("", "prompt") == {"count": 0, "tokens": []}  # no BOS counted
        one = count("a dog barks", "prompt")
        assert one["count"] == len(one["tokens"]) > 0
        assert count("a dog barks", "content") == one  # llama.cpp's field name too
        two = count("a dog barks a dog barks", "prompt")
        assert two["count"] > one["count"]
        client = make_client("openai-compatible", "smollm2", endpoints=[f"{root}/v1"])
        assert run_sync(client.acount_tokens("a dog barks")) == one["count"]
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_the_served_judge_card_holds_the_judges_request() -> None:
    """README section 8 judges on the `smollm2` replicas: the judge asks for up to
    max_tokens of reply on top of its prompt, so the card's context holds both (1024 did not:
    every call was an HTTP 400), with as much room again for the prompt."""
    import inspect
    from pathlib import Path

    from cafe.adapters.cards import load_cards
    from cafe.judge.extraction import LLMJudge

    card = load_cards([Path(__file__).parent / "data" / "cluster_cards.yaml"])["smollm2"]
    asked = inspect.signature(LLMJudge).parameters["max_tokens"].default
    assert asked == 2048 and card.options["n_ctx"] >= 2 * asked


def test_a_model_with_no_reasoning_gets_a_sentence_not_an_empty_figure(tmp_path, monkeypatch):
    """The chance baseline writes no reasoning: Figure 3 (one bin at length 0, its integer
    ticks ran together) and Figure 7 (bars of height 0) are a sentence each in summary.md
    and index.html; a panel of such a run beside a run with reasoning says it in the panel."""
    import matplotlib

    matplotlib.use("Agg")
    from cafe.reports import figures
    from cafe.reports.run_report import write_run_report

    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    common = dict(version="n20-seed0", progress=False)
    chance = run_with("random", "synth", out=tmp_path / "chance", **common)
    listener = run_with("reference", "synth", out=tmp_path / "ref", **common)
    decay = chance.metrics["decay"]
    assert figures.wrote_no_reasoning(decay)
    assert not figures.wrote_no_reasoning(listener.metrics["decay"])
    report = write_run_report(tmp_path / "chance")
    summary = (report / "summary.md").read_text(encoding="utf-8")
    said = figures.NO_REASONING.format(what="")
    assert summary.count(said) >= 2  # Figure 3 and Figure 7, as sentences
    assert not list((report / "figures").glob("figure3*")) and not list(
        (report / "figures").glob("figure7*")
    )
    assert "reasoning length is 0" in (report / "index.html").read_text(encoding="utf-8")
    fig = figures.draw_figure3([("chance", decay), ("listener", listener.metrics["decay"])])
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert any("wrote no reasoning" in t.replace("\n", " ") for t in texts)
    assert not fig.axes[0].get_xticks().size and fig.axes[1].get_xticks().size


def test_the_leaderboard_page_shows_the_users_rows_first(tmp_path, monkeypatch) -> None:
    import re

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("CAFE_LEADERBOARD", raising=False)
    run_with("reference", "synth", version="n20-seed0", out=tmp_path / "runs" / "ref",
             progress=False)  # fmt: skip
    for argv in (["leaderboard", "add", "runs/ref", "--leaderboard", "mine.yaml"],
                 ["leaderboard", "html", "--leaderboard", "mine.yaml"]):  # fmt: skip
        res = CliRunner().invoke(main, argv, catch_exceptions=False)
        assert res.exit_code == 0, res.output
    page = (tmp_path / "leaderboard.html").read_text(encoding="utf-8")
    ours = page.index('id="your-rows"')
    assert ours < page.index('id="table1"') and ours < page.index('id="rows-all"')
    section = page[ours : page.index("</section>", ours)]
    assert "reference" in section
    links = re.findall(r'href="#((?:t\d+-)?row\d+)"', section)
    assert links and all(f'id="{a}"' in page for a in links)  # each link lands on its row
    assert str(tmp_path) not in page


def test_the_smoke_summary_says_what_it_shows_and_what_it_does_not() -> None:
    from cafe.training.smoke import _say_scores

    row = {"acc": 0.0, "parse_rate": 12.5, "format_ok_rate": 12.5, "cafe_acc_per": None,
           "run_dir": "runs/x"}  # fmt: skip
    lines: list[str] = []
    _say_scores(lines.append, {"before": {**row, "acc": 12.5}, "after": row}, "n8-seed0", 8, 64)
    last = lines[-1]
    assert "what this shows: the whole MPAR² path runs end to end" in last
    assert "What it does not show: that training helps" in last and "8 items" in last
    assert "before -> after is no effect" in last


def test_a_likelihood_model_is_said_to_be_order_free(tmp_path) -> None:
    """Answers picked by option likelihood cannot depend on choice order: one line says so
    (a perfect consistency is then no finding); a model that wrote its answers gets none."""
    from cafe.records import Prediction
    from cafe.robustness.order_free import ORDER_DEMO, order_free_line
    from cafe.store import PREDICTIONS, RunStore

    def folder(name: str, scores: dict | None) -> RunStore:
        store = RunStore(tmp_path / name).create()
        preds = [Prediction(sample_id=f"s{i}", run_index=0, model="m", prompt_style="lalm",
                            template_hash="t", raw_output="A", answer="A", option_scores=scores)
                 for i in range(3)]  # fmt: skip
        with store.writer(PREDICTIONS) as w:
            w.write_many(preds)
        return store

    line = order_free_line(folder("ll", {"how": "acc_norm", "scores": [0.1, 0.2]}).root)
    assert line and "cannot depend on their order" in line and ORDER_DEMO in line
    assert order_free_line(folder("gen", None).root) is None


def test_the_sweeps_length_column_says_what_it_counts_beside_what_the_budget_bounds() -> None:
    from cafe.robustness.budgets import format_sweep

    method = "budget forcing (reference: perception cut at N words, answer forced)"
    row = {"budget": 0, "method": method, "n": 20, "acc": 50.0, "acc_ci95": None,
           "acc_per": None, "acc_per_ci95": None, "err_per": None, "err_per_ci95": None,
           "reasoning_tokens": 129.0}  # fmt: skip
    lines = format_sweep({"rows": [row]}).splitlines()
    assert "reasoning length*" in lines[1] and "reasoning tokens" not in lines[1]
    assert lines[2].rstrip().endswith("129.00")
    assert lines[-1].startswith("* mean reasoning length per answered item, the whole reasoning")
    assert lines[-1].endswith(f"the budget bounds only what its method names: {method}")
