"""The bad-input corpus, round four (issue 35): a server whose GET /models names itself, not the
model asked for; readers of sections gone stale behind cafe's back; records files that are not
regular files; bytes cafe writes that it would then refuse. Real run folders (synth, reference
listener, rule judge) and loopback servers, through the same helpers as rounds one to three."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_bad_input_corpus import Case, _cmd, _run_folder, run_kind
from test_bad_input_corpus_round3 import _served_run

from cafe.cli import main
from cafe.testing.loopback import OpenAILoopback


def _alias(name: str) -> list[dict]:
    """llama.cpp's GET /v1/models: one row, its GGUF alias, whatever name it is asked for."""
    return [{"id": name, "object": "model", "owned_by": "llamacpp", "created": 1}]


# -- served identity --------------------------------------------------------------------------
def test_a_server_listing_only_its_alias_keys_the_cache_by_it(tmp_path: Path) -> None:
    """`-o model=default` against a llama.cpp-like server that lists its own alias, restarted on
    the same URL with other weights: the second run asks every item anew."""
    with OpenAILoopback(reply=lambda b: "<answer>A</answer>", models=_alias("one.gguf")) as srv:
        code, out, _ = _served_run(tmp_path, srv.url, "a", "-o", "model=default")
        assert code == 0 and srv.count == 2, out
        manifest = json.loads((tmp_path / "a" / "manifest.json").read_text())
        assert manifest["served_model"]["reported"] == [{"id": "one.gguf", "owned_by": "llamacpp"}]
        srv.models, srv.reply = _alias("two.gguf"), (lambda b: "<answer>B</answer>")
        code, out, answers = _served_run(tmp_path, srv.url, "b", "-o", "model=default")
        assert code == 0 and srv.count == 4, out  # nothing replayed from the first weights
        assert answers == {"g1": "<answer>B</answer>", "g2": "<answer>B</answer>"}


def test_a_server_listing_several_other_models_is_keyed_by_the_list(tmp_path: Path) -> None:
    rows = [*_alias("x.gguf"), *_alias("y.gguf")]
    with OpenAILoopback(reply=lambda b: "<answer>A</answer>", models=rows) as srv:
        assert _served_run(tmp_path, srv.url, "a", "-o", "model=default")[0] == 0
        manifest = json.loads((tmp_path / "a" / "manifest.json").read_text())
        listed = manifest["served_model"]["reported"][0]["listed"]
        assert [r["id"] for r in listed] == ["x.gguf", "y.gguf"]


def test_a_server_without_models_says_there_is_no_identity_once(tmp_path: Path) -> None:
    with OpenAILoopback(reply=lambda b: "<answer>A</answer>") as srv:
        code, out, _ = _served_run(tmp_path, srv.url, "a")
        assert code == 0, out
        said = [x for x in out.splitlines() if "no identity to key on" in x]
        assert len(said) == 1 and "-o model=NAME" in said[0] and srv.url in said[0], out


# -- readers check section stamps ---------------------------------------------------------------
def _changed_behind_cafes_back(tmp: Path, how: str) -> Path:
    """A finished run folder whose predictions.jsonl is edited (one line dropped, as cafe's own
    advice "fix or delete that line" invites) or emptied after its sections were written."""
    runs = tmp / "runs"
    runs.mkdir()
    d = _run_folder(runs, "rf")
    preds = d / "predictions.jsonl"
    lines = preds.read_text().splitlines(keepends=True)
    preds.write_text("".join(lines[1:]) if how == "dropped" else "")
    return d


def _invoke(*args: str):
    return CliRunner().invoke(main, list(args))


@pytest.mark.parametrize("how", ["dropped", "emptied"])
def test_every_reader_shows_a_stale_section_as_stale(tmp_path: Path, how: str) -> None:
    d = _changed_behind_cafes_back(tmp_path, how)
    acc = json.loads((d / "metrics.json").read_text())["accuracy"]["total"]["acc"]
    shown = f"{acc:.2f}"
    # cafe report runs/: no figure of the stale sections, the status says so
    r = _invoke("report", str(d.parent))
    assert r.exit_code == 0, r.output
    line = next(x for x in r.output.splitlines() if x.startswith("| rf "))
    assert "stale: accuracy" in line and shown not in line, r.output
    # cafe leaderboard add: refused, nothing written
    board = tmp_path / "lb.yaml"
    r = _invoke(*_cmd("lb-add", d)[:2], str(d), "--leaderboard", str(board))
    assert r.exit_code != 0 and "stale" in r.output and "'accuracy'" in r.output, r.output
    assert not board.exists() and "Traceback" not in r.output
    # cafe report RUN: the summary and the HTML page say stale, and show no accuracy figure
    r = _invoke("report", str(d), "--no-figures")
    assert r.exit_code == 0, r.output
    summary = (d / "report" / "summary.md").read_text()
    assert "'accuracy' is stale" in summary and "predictions" in summary, summary
    page = (d / "report" / "index.html").read_text()
    assert '<p class="stale">accuracy: stale' in page


def test_a_fresh_folder_shows_its_figures(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    d = _run_folder(runs, "rf")
    acc = json.loads((d / "metrics.json").read_text())["accuracy"]["total"]["acc"]
    r = _invoke("report", str(runs))
    line = next(x for x in r.output.splitlines() if x.startswith("| rf "))
    assert f"{acc:.2f}" in line and "stale" not in line, r.output


# -- records files that are not regular files ---------------------------------------------------
def _fifo(tmp: Path, command: str, rel: str) -> Case:
    d = _run_folder(tmp)
    (d / rel).unlink(missing_ok=True)
    os.mkfifo(d / rel)  # opened by path, it would wait for a writer forever
    return Case(_cmd(command, d), [str(d / rel), "not a regular file"], 1)


def predictions_a_fifo_report(tmp):
    return _fifo(tmp, "report", "predictions.jsonl")


def predictions_a_fifo_decay(tmp):
    return _fifo(tmp, "decay", "predictions.jsonl")


def predictions_a_fifo_judge(tmp):
    return _fifo(tmp, "judge", "predictions.jsonl")


def judgements_a_fifo_decay(tmp):
    return _fifo(tmp, "decay", "judgements.jsonl")


def metrics_a_fifo_report(tmp):
    return _fifo(tmp, "report", "metrics.json")


KINDS = [predictions_a_fifo_report, predictions_a_fifo_decay, predictions_a_fifo_judge,
         judgements_a_fifo_decay, metrics_a_fifo_report]  # fmt: skip


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.__name__)
def test_a_records_file_that_is_no_regular_file_is_one_line(kind, tmp_path, monkeypatch):
    run_kind(kind, tmp_path, monkeypatch)


# -- what cafe writes it reads back -------------------------------------------------------------
def test_a_reply_holding_nul_is_written_so_cafe_reads_it_back(tmp_path: Path) -> None:
    """A model that emits NUL bytes (the random-weight smoke model does): the prediction is
    written with U+FFFD in their place, and every reader after reads the folder."""
    reply = "<answer>A\x00</answer> \x00\x00 tail"
    with OpenAILoopback(reply=lambda b: reply) as srv:
        code, out, answers = _served_run(tmp_path, srv.url, "a")
        assert code == 0, out
        assert answers["g1"] == reply.replace("\x00", "\ufffd")
        # what was replaced is said, once a run, naming an item
        said = [x for x in out.splitlines() if "U+FFFD" in x]
        assert len(said) == 1 and "NUL" in said[0] and "sample " in said[0], out
        code, out, _ = _served_run(tmp_path, srv.url, "a", "--runs", "2")  # a resume reads it
        assert code == 0 and "fix or delete" not in out, out  # no line is refused on read
        assert sum("U+FFFD" in x for x in out.splitlines()) == 1, out  # its new run's outputs
    r = _invoke("report", str(tmp_path / "a"), "--no-figures")
    assert r.exit_code == 0 and "NUL" not in r.output, r.output


# -- steps say what they remove -------------------------------------------------------------------
def test_decay_says_which_other_section_it_found_stale(tmp_path: Path) -> None:
    """After predictions change, `cafe decay` rewrites its own section and removes the stale
    accuracy section: it says so (steps/engine.py dropped invalidate()'s notes)."""
    d = _run_folder(tmp_path)
    preds = d / "predictions.jsonl"
    lines = preds.read_text().splitlines(keepends=True)
    preds.write_text("".join(lines[1:]))
    r = _invoke(*_cmd("decay", d))
    said = [x for x in r.output.splitlines() if "removed the accuracy section" in x]
    assert said and "cafe run" in said[0], r.output


# -- every reader type-checks its rows ------------------------------------------------------------
def _sakura(tmp: Path) -> Path:
    from sakura_helpers import write_folder

    return write_folder(tmp / "s")


def _score_sakura(root: Path, f: Path):
    return _invoke("score", "--bench", "sakura", "--data", str(root), "--predictions", str(f))


A1 = "data/Animal/audio/a1.wav"


def test_a_sakura_row_of_the_wrong_type_is_one_line(tmp_path: Path) -> None:
    root = _sakura(tmp_path)
    meta_file = root / "data" / "Animal" / "metadata.json"
    meta = json.loads(meta_file.read_text())
    meta[A1]["audio_path"] = 42
    meta_file.write_text(json.dumps(meta))
    from cafe.benchmarks.sakura import SAKURA

    loaded = SAKURA().load(str(root))  # the other clips load
    lines = [str(p) for p in loaded.problems if "Animal-a1-single" in str(p)]
    assert lines and "field audio_path" in lines[0] and "not int '42'" in lines[0], lines
    assert any(s.id == "Animal-a2-single" and s.error is None for s in loaded.samples)


def test_sakura_results_with_an_unhashable_instruction_are_one_line(tmp_path: Path) -> None:
    root = _sakura(tmp_path)
    f = tmp_path / "r.json"
    f.write_text(json.dumps({"attribute": "Animal", "results": {
        A1: {"instruction": {"a": 1}, "response": "dog", "label": "(a) dog"},
        "data/Animal/audio/a2.wav": {"instruction": "x", "response": "cow", "label": "(c) cow"},
    }}))  # fmt: skip
    r = _score_sakura(root, f)
    assert "Traceback" not in r.output and not isinstance(r.exception, TypeError), r.output
    assert any(A1 in x and "field instruction" in x for x in r.output.splitlines()), r.output


def test_sakura_results_nested_past_the_parser_are_one_line(tmp_path: Path) -> None:
    root = _sakura(tmp_path)
    f = tmp_path / "r.json"
    f.write_text('{"results": ' + "[" * 100_000 + "]" * 100_000 + "}")
    r = _score_sakura(root, f)
    assert r.exit_code != 0 and not isinstance(r.exception, RecursionError), r.output
    assert any(str(f) in x and "nested more than" in x for x in r.output.splitlines()), r.output


def test_a_git_that_hangs_leaves_the_manifest_without_the_dirty_mark(tmp_path, monkeypatch):
    # the manifest asks git for the checkout's commit and whether it is dirty; a git that
    # answers the first and hangs on the second was a TimeoutExpired traceback out of a run
    from cafe import manifest

    fake = tmp_path / "bin" / "git"
    fake.parent.mkdir()
    fake.write_text('#!/bin/sh\ncase "$*" in *status*) exec sleep 30;; *) echo abc123;; esac\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}:{os.environ['PATH']}")
    monkeypatch.setattr(manifest, "GIT_TIMEOUT_S", 0.3)
    assert manifest.git_commit() == "abc123"
