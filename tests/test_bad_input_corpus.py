"""The bad-input corpus: each kind of bad input, given to the command that reads it, is one line
naming the file (and the sample id and field where there is an item), never a traceback; the
good items beside it are all processed; nothing already on disk is lost. KINDS counts them.

Runs use an OpenAI-compatible loopback server as the model, so every clip that gets past the
checks is really decoded and encoded the way an API model receives it."""

from __future__ import annotations

import base64
import csv
import io
import json
import os
import re
import shutil
import struct
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile as sf
from click.testing import CliRunner

from cafe.audio import write_wav
from cafe.cli import main
from cafe.testing.loopback import OpenAILoopback


def _item(sid: str, audio: str | None = None, **over) -> dict:
    item = {
        "id": sid, "audio_path": audio or f"./audio/{sid}.wav", "question": "Which is first?",
        "choices": ["A", "B"], "answer": "A", "modality": "music",
        "category": "Perception Layer", "sub-category": "Temporal Analysis", "language": None,
        "source": "x", "url": "u", "timestamp": "0",
    }  # fmt: skip
    item.update(over)
    return item


def _tone(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_wav(path, (0.3 * np.sin(2 * np.pi * 440 * np.arange(8000) / 16000)).astype(np.float32))


def _wav_header(sr: int, ch: int, bits: int, nbytes: int) -> bytes:
    ba = ch * bits // 8
    fmt = struct.pack("<IHHIIHH", 16, 1, ch, sr, sr * ba, ba, bits)
    return (
        b"RIFF"
        + struct.pack("<I", 36 + nbytes)
        + b"WAVEfmt "
        + fmt
        + b"data"
        + struct.pack("<I", nbytes)
    )


@dataclass
class Case:
    """What one kind must produce: ``says`` all on one output line; ``good`` items predicted."""

    args: list[str]
    says: list[str]
    exit_code: int = 0
    good: tuple[str, ...] = ()
    keep: tuple[Path, ...] = ()  # files that must be byte-identical afterwards
    reply: Callable[[dict], str] | None = None  # the server's behaviour, for judge kinds
    check: Callable[[str], None] | None = None  # more assertions (gets the output)
    env: dict[str, str] = field(default_factory=dict)
    restore: Callable[[], None] | None = None  # undo the fault (free space, make writable)…
    resume: list[str] | None = None  # … then this command completes: exit 0, and
    resumed: Callable[[], None] | None = None  # these assertions hold (every item done)
    cleanup: Callable[[], None] | None = None  # unmount what the kind mounted
    server: Callable[[], Any] | None = None  # another model server than OpenAILoopback(reply)


# -- cafe run: metadata --------------------------------------------------------------------
def _bench(tmp: Path, items: list, *, text: str | None = None, name="meta.jsonl") -> Path:
    root = tmp / "data"
    for i in items:
        if isinstance(i, dict) and isinstance(i.get("id"), str):
            _tone(root / "audio" / f"{i['id']}.wav")
    root.mkdir(parents=True, exist_ok=True)
    meta = root / name
    if text is None:
        text = "".join(json.dumps(i) + "\n" for i in items)
    meta.write_text(text)
    return meta


GOOD = [_item("g1"), _item("g2")]


def _run_args(meta: Path, tmp: Path, bench: str = "mmar") -> list[str]:
    return ["run", "--model", "openai-compatible", "-o", "model=m", "--endpoint", "{url}",
            "--bench", bench, "--data", str(meta), "--out", str(tmp / "run"), "--judge", "none",
            "--no-progress"]  # fmt: skip


def meta_empty(tmp):
    meta = _bench(tmp, [], text="")
    return Case(_run_args(meta, tmp), [str(meta), "metadata file is empty"], 1)


def meta_truncated_json(tmp):
    meta = _bench(tmp, GOOD, text=json.dumps(GOOD)[:-30], name="meta.json")
    return Case(_run_args(meta, tmp), [str(meta), "not valid JSON"], 1)


def meta_bad_line_in_middle(tmp):
    text = json.dumps(GOOD[0]) + "\n{oops\n" + json.dumps(GOOD[1]) + "\n"
    meta = _bench(tmp, GOOD, text=text)
    return Case(_run_args(meta, tmp), [str(meta), "line 2: not valid JSON"], good=("g1", "g2"))


def meta_duplicate_id(tmp):
    meta = _bench(tmp, [*GOOD, _item("g1", question="again?")])
    return Case(_run_args(meta, tmp), [str(meta), "g1", "field id", "duplicate"], good=("g1", "g2"))


def meta_answer_not_in_choices(tmp):
    meta = _bench(tmp, [*GOOD, _item("b", answer="C")])
    return Case(_run_args(meta, tmp), [str(meta), "sample b", "field answer", "not among"],
                good=("g1", "g2"))  # fmt: skip


def meta_null_field(tmp):
    meta = _bench(tmp, [*GOOD, _item("b", question=None)])
    return Case(_run_args(meta, tmp), [str(meta), "sample b", "field question"], good=("g1", "g2"))


def meta_wrong_type(tmp):
    meta = _bench(tmp, [*GOOD, _item("b", choices="A or B")])
    return Case(_run_args(meta, tmp), [str(meta), "sample b", "field choices", "not a list"],
                good=("g1", "g2"))  # fmt: skip


def meta_missing_id(tmp):
    bad = _item("x")
    del bad["id"]
    meta = _bench(tmp, [*GOOD, bad])
    return Case(_run_args(meta, tmp), [str(meta), "item 3 has no id", "field id"],
                good=("g1", "g2"))  # fmt: skip


def meta_not_an_object(tmp):
    meta = _bench(tmp, GOOD, text=json.dumps([*GOOD, 42]), name="meta.json")
    return Case(_run_args(meta, tmp), [str(meta), "item 3 is not a JSON object"], good=("g1", "g2"))


def meta_missing_audio_field(tmp):
    bad = _item("b")
    del bad["audio_path"]
    meta = _bench(tmp, [*GOOD, bad])
    return Case(_run_args(meta, tmp), [str(meta), "sample b", "field audio_path", "missing"],
                good=("g1", "g2"))  # fmt: skip


def meta_audio_outside_root(tmp):
    _tone(tmp / "elsewhere" / "x.wav")
    meta = _bench(tmp, [*GOOD, _item("b", audio="../elsewhere/x.wav")])
    return Case(_run_args(meta, tmp), [str(meta), "sample b", "field audio_path", "outside"],
                good=("g1", "g2"))  # fmt: skip


def meta_wrong_benchmark(tmp):
    mmau = [{"id": "u1", "audio_id": "./a/u1.wav", "question": "q", "choices": ["A", "B"],
             "answer": "A", "task": "t", "difficulty": "easy", "sub-category": "s",
             "category": "c"}]  # fmt: skip
    meta = _bench(tmp, [], text=json.dumps(mmau), name="mmau.json")
    return Case(_run_args(meta, tmp), [str(meta), "looks like MMAU", "--bench mmau"], 1)


def meta_not_utf8(tmp):
    meta = _bench(tmp, GOOD)
    meta.write_bytes(b"\xff\xfe\x00garbage" + meta.read_bytes())
    return Case(_run_args(meta, tmp), [str(meta), "cannot read metadata"], 1)


def meta_missing_file(tmp):
    meta = tmp / "nope" / "meta.jsonl"
    return Case(_run_args(meta, tmp), [str(meta), "not found"], 1)


# -- cafe run: audio -----------------------------------------------------------------------
def _with_clip(tmp: Path, write: Callable[[Path], None], says: list[str], ok: bool = False):
    meta = _bench(tmp, [*GOOD, _item("b")])
    clip = meta.parent / "audio" / "b.wav"
    clip.unlink()
    write(clip)
    good = ("g1", "g2", "b") if ok else ("g1", "g2")
    return Case(_run_args(meta, tmp), [] if ok else [str(clip), "sample b", "audio", *says],
                good=good)  # fmt: skip


def audio_missing(tmp):
    return _with_clip(tmp, lambda p: None, ["file not found"])


def audio_empty(tmp):
    return _with_clip(tmp, lambda p: p.write_bytes(b""), ["file is empty"])


def audio_truncated_header(tmp):
    return _with_clip(tmp, lambda p: p.write_bytes(_wav_header(16000, 1, 16, 3200)[:20]),
                      ["cannot decode audio"])  # fmt: skip


def audio_not_audio(tmp):
    return _with_clip(tmp, lambda p: p.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 400),
                      ["cannot decode audio"])  # fmt: skip


def audio_nan_samples(tmp):
    def write(p):
        x = np.zeros(1600, dtype=np.float32)
        x[7] = np.nan
        sf.write(p, x, 16000, subtype="FLOAT")

    return _with_clip(tmp, write, ["NaN"])


def audio_zero_hz(tmp):
    return _with_clip(tmp, lambda p: p.write_bytes(_wav_header(0, 1, 16, 3200) + b"\0" * 3200),
                      ["cannot decode audio"])  # fmt: skip


def audio_two_hours(tmp):
    def write(p):  # a real 2-hour header over a sparse file: cheap to make, costly to decode
        n = 2 * 3600 * 16000 * 2
        with open(p, "wb") as f:
            f.write(_wav_header(16000, 1, 16, n))
            f.truncate(44 + n)

    return _with_clip(tmp, write, ["7200 s long", "CAFE_MAX_AUDIO_S"])


def audio_8bit(tmp):  # unusual but valid: runs like any clip
    t = np.arange(8000) / 16000
    return _with_clip(tmp, lambda p: sf.write(p, 0.3 * np.sin(2 * np.pi * 440 * t), 16000,
                                              subtype="PCM_U8"), [], ok=True)  # fmt: skip


def audio_stereo_96k(tmp):  # unusual but valid: downmixed and resampled
    t = np.arange(48000) / 96000
    x = np.stack([np.sin(2 * np.pi * 440 * t), np.sin(2 * np.pi * 660 * t)], axis=1) * 0.3
    return _with_clip(tmp, lambda p: sf.write(p, x, 96000), [], ok=True)


# -- cafe score: predictions files ---------------------------------------------------------
def _score(tmp: Path, preds: bytes | str, says: list[str], code: int = 0):
    meta = _bench(tmp, [*GOOD, _item("g3")])
    path = tmp / "preds.jsonl"
    path.write_bytes(preds if isinstance(preds, bytes) else preds.encode())
    return Case(["score", "--bench", "mmar", "--meta", str(meta), "--predictions", str(path)],
                [str(path), *says], code)  # fmt: skip


def preds_not_utf8(tmp):
    return _score(tmp, b'{"id": "g1", "model_prediction": "\xff\xfe"}\n', ["not UTF-8"], 1)


def preds_not_a_list(tmp):
    return _score(tmp, "42\n", ["line 1: not a JSON object"])


def preds_missing_key(tmp):
    rows = [{"id": "g1", "model_prediction": "A"}, {"id": "g2", "other": "A"}]
    return _score(tmp, "".join(json.dumps(r) + "\n" for r in rows),
                  ["sample g2", "answer_prediction", "no prediction"])  # fmt: skip


def preds_missing_id(tmp):
    rows = [{"id": "g1", "model_prediction": "A"}, {"model_prediction": "B"}]
    return _score(tmp, "".join(json.dumps(r) + "\n" for r in rows), ["item 2 has no id", "id"])


def preds_empty(tmp):
    return _score(tmp, "", ["file is empty"], 1)


# -- cafe judge: judge replies -------------------------------------------------------------
def _judged_run(tmp: Path, reply: Callable[[dict], str], says: list[str]):
    """A finished run judged once by the rule judge: a bad LLM-judge reply must neither stop
    the other items nor touch that earlier result."""
    from test_judge_pipeline import build_run

    store = build_run(tmp / "jrun")
    caps = tmp / "caps.jsonl"
    caps.write_text("".join(json.dumps({"sample_id": f"s{i}", "caption": "a dog barks"}) + "\n"
                            for i in range(4)))  # fmt: skip
    ok = {k: [] for k in ("required_events", "all_caption_events", "all_reasoning_events",
                          "matched_events", "error_matched", "error_use", "neutral_events",
                          "missed_events")}  # fmt: skip

    def answer(body):
        text = body["messages"][-1]["content"]
        return reply(body) if "church bell" in text else json.dumps(ok)  # odd items: bad reply

    return Case(["judge", str(store.root), "--judge", "openai-compatible", "--judge-model", "j",
                 "--judge-endpoint", "{url}", "--captions", str(caps), "--no-progress"],
                ["judgements.openai-compatible-j.jsonl", "sample s", *says],
                reply=answer)  # fmt: skip


def judge_reply_not_json(tmp):
    return _judged_run(tmp, lambda b: "I think the events are a dog", ["no JSON object"])


def judge_reply_missing_keys(tmp):
    return _judged_run(tmp, lambda b: json.dumps({"matched_events": []}), ["invalid after"])


def judge_reply_wrong_types(tmp):
    bad = {k: 3 for k in ("required_events", "all_caption_events", "all_reasoning_events",
                          "matched_events", "error_matched", "error_use", "neutral_events",
                          "missed_events")}  # fmt: skip
    return _judged_run(tmp, lambda b: json.dumps(bad), ["invalid after"])


# -- captions, recipes, cards, leaderboard -------------------------------------------------
def captions_missing_caption(tmp):
    from test_judge_pipeline import build_run

    store = build_run(tmp / "jrun")
    caps = tmp / "caps.jsonl"
    caps.write_text(json.dumps({"sample_id": "s0", "caption": "x"}) + "\n"
                    + json.dumps({"sample_id": "s1"}) + "\n")  # fmt: skip
    return Case(["judge", str(store.root), "--judge", "openai-compatible", "--judge-model", "j",
                 "--judge-endpoint", "{url}", "--captions", str(caps), "--no-progress"],
                [f"{caps}:2", "sample s1", "field caption"], 1)  # fmt: skip


def captions_json_not_object(tmp):
    from test_judge_pipeline import build_run

    store = build_run(tmp / "jrun")
    caps = tmp / "caps.json"
    caps.write_text("[1, 2]")
    return Case(["judge", str(store.root), "--judge", "openai-compatible", "--judge-model", "j",
                 "--judge-endpoint", "{url}", "--captions", str(caps), "--no-progress"],
                [str(caps), "expected a JSON object"], 1)  # fmt: skip


def recipe_not_yaml(tmp):
    recipe = tmp / "recipe.yaml"
    recipe.write_text("model: [unclosed\n")
    data = tmp / "sft.jsonl"
    data.write_text("")
    return Case(["train", "sft", "--recipe", str(recipe), "--data", str(data), "--out",
                 str(tmp / "ckpt")], [f"{recipe}:", "not valid YAML"], 2)  # fmt: skip


def cards_not_yaml(tmp):
    cards = tmp / "cards.yaml"
    cards.write_text("m: {adapter: random, checkpoint: [\n")
    return Case(["adapters", "show", "m", "--cards", str(cards)],
                [f"{cards}:", "not valid YAML"], 1)  # fmt: skip


def cards_missing_adapter(tmp):
    cards = tmp / "cards.yaml"
    cards.write_text("m: {checkpoint: x}\n")
    return Case(["adapters", "show", "m", "--cards", str(cards)],
                [str(cards), "card m", "field adapter"], 1)  # fmt: skip


def leaderboard_bad_row(tmp):
    from cafe.reports.leaderboard import PACKAGED

    board = tmp / "lb.yaml"
    text = Path(PACKAGED).read_text()
    board.write_text(re.sub(r"\bacc: [0-9.]+", 'acc: "high"', text, count=1))
    return Case(["leaderboard", "show", "--leaderboard", str(board)], [str(board), "acc"], 1,
                keep=(board,))  # fmt: skip


# -- round two: hostile options, YAML bombs, damaged run folders, machine faults ------------
SECRET = "sk-PLANT-corpus-0123456789"


def _no_secret(out: str) -> None:
    assert SECRET not in out


def option_yaml_error_quotes_no_secret(tmp):
    meta = _bench(tmp, GOOD)
    return Case([*_run_args(meta, tmp), "-o", f"extra_body={{api_key: {SECRET}"],
                ["--option extra_body", "not valid YAML"], 2, check=_no_secret)  # fmt: skip


def option_unclosed_list(tmp):
    meta = _bench(tmp, GOOD)
    return Case([*_run_args(meta, tmp), "-o", "x=[oops"], ["--option x", "not valid YAML"], 2)


def option_concurrency_not_a_number(tmp):
    meta = _bench(tmp, GOOD)
    return Case([*_run_args(meta, tmp), "-o", "concurrency=abc"],
                ["option concurrency", "expected int", "found a string"], 1)  # fmt: skip


def option_extra_body_a_list(tmp):
    meta = _bench(tmp, GOOD)
    return Case([*_run_args(meta, tmp), "-o", "extra_body=[1,2]"],
                ["option extra_body", "expected dict", "found a list"], 1)  # fmt: skip


def option_alias_bomb(tmp):
    meta = _bench(tmp, GOOD)
    bomb = "[" + ",".join(["&a [x,x,x,x,x,x,x,x,x,x]"] + ["*a"] * 20) + "]"
    nested = "&b [" + ",".join(["*a"] * 9) + "]"
    value = bomb[:-1] + "," + nested + "," + ",".join(["&c [" + ",".join(["*b"] * 99) + "]"]
                                                     + ["*c"] * 99) + "]"  # fmt: skip
    return Case([*_run_args(meta, tmp), "-o", f"extra_body={{x: {value}}}"],
                ["--option extra_body", "aliases expand"], 2)  # fmt: skip


#: nine levels of nine aliases: 9**9 nodes once expanded, a few hundred bytes on disk
ALIAS_BOMB = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{','.join([f'*{chr(97 + i)}'] * 9)}]\n" for i in range(9)
)


def _yaml_file(tmp: Path, name: str, text: str) -> Path:
    p = tmp / name
    p.write_text(text)
    return p


def cards_alias_bomb(tmp):
    cards = _yaml_file(tmp, "cards.yaml", ALIAS_BOMB)
    return Case(["adapters", "show", "m", "--cards", str(cards)], [str(cards), "aliases expand"],
                1, keep=(cards,))  # fmt: skip


def cards_recursive_alias(tmp):
    cards = _yaml_file(tmp, "cards.yaml", "m: &m {adapter: random, options: {x: *m}}\n")
    return Case(["adapters", "show", "m", "--cards", str(cards)],
                [str(cards), "recursive alias"], 1)  # fmt: skip


def cards_too_large(tmp):
    cards = _yaml_file(tmp, "cards.yaml", "# padding\n" * 1_700_000)  # 17 MB of comments
    return Case(["adapters", "show", "m", "--cards", str(cards)],
                [str(cards), "larger than 16 MB"], 1)  # fmt: skip


def cards_alias_bomb_in_run(tmp):
    meta = _bench(tmp, GOOD)
    cards = _yaml_file(tmp, "cards.yaml", ALIAS_BOMB)
    return Case([*_run_args(meta, tmp), "--cards", str(cards)], [str(cards), "aliases expand"], 1)


def leaderboard_alias_bomb(tmp):
    board = _yaml_file(tmp, "lb.yaml", ALIAS_BOMB)
    return Case(["leaderboard", "show", "--leaderboard", str(board)],
                [str(board), "aliases expand"], 1, keep=(board,))  # fmt: skip


def leaderboard_recursive_alias(tmp):
    board = _yaml_file(tmp, "lb.yaml", "schema_version: 1\nrows: &r [*r]\n")
    return Case(["leaderboard", "show", "--leaderboard", str(board)],
                [str(board), "recursive alias"], 1, keep=(board,))  # fmt: skip


def leaderboard_not_a_mapping(tmp):
    board = _yaml_file(tmp, "lb.yaml", "[1, 2]\n")
    return Case(["leaderboard", "show", "--leaderboard", str(board)],
                [str(board), "expected a mapping"], 1, keep=(board,))  # fmt: skip


def recipe_alias_bomb(tmp):
    recipe = _yaml_file(tmp, "recipe.yaml", ALIAS_BOMB)
    data = _yaml_file(tmp, "sft.jsonl", "")
    return Case(["train", "sft", "--recipe", str(recipe), "--data", str(data), "--out",
                 str(tmp / "ckpt")], [str(recipe), "aliases expand"], 2)  # fmt: skip


# -- benchmark items that any output would pass --------------------------------------------
def meta_empty_answer(tmp):
    meta = _bench(tmp, [*GOOD, _item("b", answer="")])
    return Case(_run_args(meta, tmp), [str(meta), "sample b", "field answer", "is empty"],
                good=("g1", "g2"))  # fmt: skip


def meta_blank_answer(tmp):
    meta = _bench(tmp, [*GOOD, _item("b", answer="   ")])
    return Case(_run_args(meta, tmp), [str(meta), "sample b", "field answer", "is empty"],
                good=("g1", "g2"))  # fmt: skip


def meta_empty_choice_and_answer(tmp):  # the attack: choices ["", "B"], answer ""
    meta = _bench(tmp, [*GOOD, _item("b", choices=["", "B"], answer="")])
    return Case(_run_args(meta, tmp), [str(meta), "sample b", "field answer", "is empty"],
                good=("g1", "g2"))  # fmt: skip


def meta_empty_choice_beside_the_answer(tmp):  # as 4 real MMAR items ship: kept, it runs
    meta = _bench(tmp, [*GOOD, _item("b", choices=["A", "B", ""], answer="A")])
    return Case(_run_args(meta, tmp), [], good=("g1", "g2", "b"))


# -- run folders: damaged files -------------------------------------------------------------
_BUILT: dict[str, Path] = {}


def _run_folder(tmp: Path, name: str = "rf") -> Path:
    """A real finished run folder (synth, reference listener, rule judge), built once and
    copied for each kind."""
    if "rf" not in _BUILT:
        root = Path(tempfile.mkdtemp(prefix="cafe-corpus-"))
        saved = os.environ.get("CAFE_CACHE")
        os.environ["CAFE_CACHE"] = str(root / "cache")
        try:
            args = ["run", "--version", "n4-seed0", "--out", str(root / "rf"), "--no-progress",
                    "--judge", "rule"]  # fmt: skip
            r = CliRunner().invoke(main, args)
        finally:
            if saved is None:
                os.environ.pop("CAFE_CACHE", None)
            else:
                os.environ["CAFE_CACHE"] = saved
        assert r.exit_code == 0, r.output
        _BUILT["rf"] = root / "rf"
    dest = tmp / name
    shutil.copytree(_BUILT["rf"], dest, symlinks=True)
    return dest


def _cmd(name: str, d: Path) -> list[str]:
    return {
        "report": ["report", str(d), "--no-figures"],
        "judge": ["judge", str(d), "--judge", "rule", "--no-progress"],
        "decay": ["decay", str(d)],
        "run": ["run", "--version", "n4-seed0", "--out", str(d), "--no-progress", "--judge",
                "rule"],
        "lb-add": ["leaderboard", "add", str(d), "--leaderboard", str(d.parent / "lb.yaml")],
    }[name]  # fmt: skip


def _damaged(tmp, command: str, rel: str, content: str | bytes | None, says: list[str]):
    d = _run_folder(tmp)
    p = d / rel
    if content is None:  # a folder where the file should be
        p.unlink()
        p.mkdir()
    elif isinstance(content, bytes):
        p.write_bytes(content)
    else:
        p.write_text(content)
    return Case(_cmd(command, d), [str(p), *says], 1)


DAMAGED_JSON = ["is damaged", "not valid JSON"]
A_FOLDER = ["Is a directory", "a folder stands where a file is expected"]


def manifest_garbage(tmp):
    return _damaged(tmp, "report", "manifest.json", "{garbage", [*DAMAGED_JSON, "backup"])


def manifest_empty(tmp):
    return _damaged(tmp, "run", "manifest.json", "", DAMAGED_JSON)


def manifest_a_list(tmp):
    return _damaged(tmp, "report", "manifest.json", "[1, 2]", ["is damaged", "not a JSON object"])


def manifest_a_folder(tmp):
    return _damaged(tmp, "report", "manifest.json", None, A_FOLDER)


def manifest_not_utf8(tmp):
    return _damaged(tmp, "lb-add", "manifest.json", b"\xff\xfe{}", ["is damaged"])


def metrics_garbage(tmp):
    return _damaged(tmp, "judge", "metrics.json", "{garbage", [*DAMAGED_JSON, "delete it"])


def metrics_empty(tmp):
    return _damaged(tmp, "decay", "metrics.json", "", DAMAGED_JSON)


def metrics_a_list(tmp):
    return _damaged(tmp, "lb-add", "metrics.json", "[]", ["is damaged", "not a JSON object"])


def metrics_a_folder(tmp):
    return _damaged(tmp, "report", "metrics.json", None, A_FOLDER)


def samples_garbage_line(tmp):
    return _damaged(tmp, "report", "samples.jsonl", "garbage\n{}\n",
                    ["line 1: not valid JSON", "fix or delete that line"])  # fmt: skip


def samples_lines_are_lists(tmp):
    return _damaged(tmp, "judge", "samples.jsonl", "[1, 2]\n[3]\n",
                    ["line 1", "expected a JSON object, found a list"])  # fmt: skip


def samples_a_folder(tmp):
    return _damaged(tmp, "report", "samples.jsonl", None, ["cannot read", "Is a directory"])


def _edit_line(tmp, command: str, rel: str, edit: Callable[[dict], None], says: list[str]):
    d = _run_folder(tmp)
    p = d / rel
    lines = p.read_text().splitlines()
    rec = json.loads(lines[1])
    edit(rec)
    lines[1] = json.dumps(rec)
    p.write_text("\n".join(lines) + "\n")
    return Case(_cmd(command, d), [f"{p}: line 2", *says], 1)


def samples_missing_question(tmp):
    return _edit_line(tmp, "report", "samples.jsonl", lambda r: r.pop("question"),
                      ["field question: missing"])  # fmt: skip


def prediction_missing_run_index(tmp):
    return _edit_line(tmp, "report", "predictions.jsonl", lambda r: r.pop("run_index"),
                      ["sample synth-00001", "field run_index: missing"])  # fmt: skip


def prediction_run_index_a_string(tmp):
    return _edit_line(tmp, "decay", "predictions.jsonl", lambda r: r.update(run_index="zero"),
                      ["field run_index", "expected int, found a string"])  # fmt: skip


def prediction_sections_a_list(tmp):
    return _edit_line(tmp, "judge", "predictions.jsonl", lambda r: r.update(sections=[1]),
                      ["field sections", "expected dict, found a list"])  # fmt: skip


def prediction_output_a_number(tmp):
    return _edit_line(tmp, "run", "predictions.jsonl", lambda r: r.update(raw_output=42),
                      ["field raw_output", "found a int"])  # fmt: skip


def prediction_line_not_utf8(tmp):
    d = _run_folder(tmp)
    p = d / "predictions.jsonl"
    lines = p.read_bytes().split(b"\n")
    p.write_bytes(b"\n".join([lines[0], b'{"sample_id": "\xff\xfe"}', *lines[1:]]))
    return Case(_cmd("report", d), [f"{p}: line 2", "not valid JSON"], 1)


def judgement_events_a_string(tmp):
    return _edit_line(tmp, "report", "judgements.jsonl",
                      lambda r: r.update(matched_events="a dog"),
                      ["field matched_events", "expected list"])  # fmt: skip


def report_is_a_file(tmp):
    d = _run_folder(tmp)
    shutil.rmtree(d / "report", ignore_errors=True)
    (d / "report").write_text("not a folder")
    return Case(_cmd("report", d), [str(d / "report"), "a file stands where a folder"], 1,
                keep=(d / "report",))  # fmt: skip


# -- where output goes ------------------------------------------------------------------------
def out_name_too_long(tmp):
    meta = _bench(tmp, GOOD)
    args = _run_args(meta, tmp)
    args[args.index("--out") + 1] = str(tmp / ("x" * 300))
    return Case(args, ["x" * 300, "File name too long", "choose a shorter path"], 1)


def out_is_a_file(tmp):
    meta = _bench(tmp, GOOD)
    f = _yaml_file(tmp, "taken.json", "{}")
    args = _run_args(meta, tmp)
    args[args.index("--out") + 1] = str(f)
    return Case(args, [str(f), "a file stands where a folder is expected"], 1, keep=(f,))


def out_under_a_file(tmp):
    meta = _bench(tmp, GOOD)
    f = _yaml_file(tmp, "taken.json", "{}")
    args = _run_args(meta, tmp)
    args[args.index("--out") + 1] = str(f / "run")
    return Case(args, [str(f), "Not a directory"], 1, keep=(f,))


def cache_env_names_a_file(tmp):
    meta = _bench(tmp, GOOD)
    f = _yaml_file(tmp, "cache.json", "{}")
    return Case(_run_args(meta, tmp), [str(f), "cannot be used", "running without it"],
                good=("g1", "g2"), keep=(f,), env={"CAFE_CACHE": str(f)})  # fmt: skip


def cache_file_not_a_database(tmp):
    meta = _bench(tmp, GOOD)
    (tmp / "cache").mkdir()
    db = tmp / "cache" / "calls.sqlite"
    db.write_bytes(b"not sqlite at all" * 100)
    return Case(_run_args(meta, tmp), [str(db), "cannot be used", "running without it"],
                good=("g1", "g2"), keep=(db,))  # fmt: skip


def strict_stop_is_recorded(tmp):
    meta = _bench(tmp, [*GOOD, _item("b")])
    (meta.parent / "audio" / "b.wav").unlink()
    run = tmp / "run"

    def check(out: str) -> None:  # the manifest never stays "running" after a caught error
        assert json.loads((run / "manifest.json").read_text())["status"] == "failed"

    args = [*_run_args(meta, tmp), "--strict", "--version", "v1"]
    return Case(args, ["--strict", "sample b", "file not found"],
                1, check=check)  # fmt: skip


# -- links, embedded clips, spreadsheet cells -----------------------------------------------
def report_link_leaves_the_folder(tmp):
    d = _run_folder(tmp)
    elsewhere = tmp / "elsewhere"
    elsewhere.mkdir()
    victim = _yaml_file(elsewhere, "index.html", "precious")
    shutil.rmtree(d / "report", ignore_errors=True)
    (d / "report").symlink_to(elsewhere)
    return Case(_cmd("report", d), [str(d / "report"), "outside the run folder", "remove the link"],
                1, keep=(victim,))  # fmt: skip


def report_file_link_leaves_the_folder(tmp):
    d = _run_folder(tmp)
    victim = _yaml_file(tmp, "notes.md", "precious")
    (d / "report").mkdir(exist_ok=True)
    (d / "report" / "summary.md").unlink(missing_ok=True)
    (d / "report" / "summary.md").symlink_to(victim)
    return Case(_cmd("report", d), [str(d / "report" / "summary.md"), "outside the run folder"],
                1, keep=(victim,))  # fmt: skip


def embed_audio_outside_the_data(tmp):
    d = _run_folder(tmp)
    secret = tmp / "private" / "voice.wav"
    _tone(secret)
    lines = (d / "samples.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    first["audio"] = [str(secret)]
    lines[0] = json.dumps(first)
    (d / "samples.jsonl").write_text("\n".join(lines) + "\n")

    def check(out: str) -> None:
        page = (d / "report" / "index.html").read_text()
        assert base64.b64encode(secret.read_bytes()).decode() not in page
        assert page.count("data:audio/wav;base64,") == 3  # the other clips, inside the data

    return Case([*_cmd("report", d), "--embed-audio", "60"], [], check=check)


def csv_formula_in_a_model_name(tmp):
    from cafe.reports.leaderboard import PACKAGED

    board = tmp / "lb.yaml"
    text = Path(PACKAGED).read_text()
    evil = ['=HYPERLINK("http://x.example","y")', "+1+1", "-2+3", "@SUM(A1)"]
    head, rows = text.split("\nrows:", 1)
    for name, new in zip(
        ["MiMo-Audio", "Qwen2.5-Omni-7B", "Omni-R1", "Kimi-Audio"], evil, strict=True
    ):  # the rows, and the tables' layout that names them
        rows = rows.replace(f'model: "{name}"', f"model: {json.dumps(new)}")
        head = re.sub(
            rf"(?<=[\[ ]){re.escape(name)}(?=[,\]])", json.dumps(new).replace("\\", r"\\"), head
        )
    text = head + "\nrows:" + rows
    board.write_text(text)

    def check(out: str) -> None:
        cells = [c for row in csv.reader(io.StringIO(out)) for c in row]
        assert "'" + evil[0] in cells and "'+1+1" in cells
        assert not [c for c in cells if c[:1] in ("=", "+", "@")]
        assert not [c for c in cells if c.startswith("-") and not re.fullmatch(r"-[0-9.]+", c)]

    return Case(["report", "--table", "2", "--format", "csv", "--leaderboard", str(board)], [],
                check=check, keep=(board,))  # fmt: skip


# -- machine faults: a full disk, a read-only file system ---------------------------------
def _tmpfs(tmp: Path, size: str = "1m") -> tuple[Path, Callable[[], None]]:
    mnt = tmp / "mnt"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt)],
                       capture_output=True)  # fmt: skip
    if r.returncode:
        pytest.skip("a full disk and a read-only file system need root (mount -t tmpfs)")
    return mnt, lambda: subprocess.run(["umount", "-l", str(mnt)], check=True)


def _fill(mnt: Path) -> Path:
    """Fill the file system to the last byte; deleting the file frees it again."""
    fill = mnt / ".fill"
    with open(fill, "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 65536)
        except OSError:
            pass
        try:
            while True:
                f.write(b"\0" * 512)
        except OSError:
            pass
    return fill


def _all_done(run: Path, n: int) -> Callable[[], None]:
    def check() -> None:
        keys = {(json.loads(x)["sample_id"], json.loads(x)["run_index"])
                for x in (run / "predictions.jsonl").read_text().splitlines()}  # fmt: skip
        assert len(keys) == n
        assert json.loads((run / "manifest.json").read_text())["status"] == "complete"

    return check


def disk_full_during_run(tmp):
    mnt, umount = _tmpfs(tmp)
    run = mnt / "run"
    args = ["run", "--version", "n4-seed0", "--out", str(run), "--no-progress", "--judge", "rule"]
    fill = _fill(mnt)

    def check(out: str) -> None:  # nothing says "running" (no manifest, or a failed one)
        m = run / "manifest.json"
        assert not m.exists() or json.loads(m.read_text())["status"] != "running"

    return Case(args, [str(run), "No space left on device", "free some space"], 1, check=check,
                restore=fill.unlink, resume=args, resumed=_all_done(run, 4),
                cleanup=umount)  # fmt: skip


def disk_full_during_report(tmp):
    mnt, umount = _tmpfs(tmp, "4m")
    d = _run_folder(mnt)
    fill = _fill(mnt)
    args = ["report", str(d)]
    return Case(args, [str(d), "No space left on device", "free some space"], 1,
                restore=fill.unlink, resume=args,
                resumed=lambda: (d / "report" / "index.html").stat(), cleanup=umount)  # fmt: skip


def _read_only(tmp, command: str, extra: tuple[str, ...] = (), runs: int = 1):
    mnt, umount = _tmpfs(tmp, "4m")
    d = _run_folder(mnt)
    subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True)
    args = [*_cmd(command, d), *extra]

    def restore() -> None:
        subprocess.run(["mount", "-o", "remount,rw", str(mnt)], check=True)

    done = _all_done(d, 4 * runs) if command == "run" else None
    return Case(args, [str(d), "Read-only file system", "make it writable"], 1,
                restore=restore, resume=args, resumed=done, cleanup=umount)  # fmt: skip


def read_only_run(tmp):
    return _read_only(tmp, "run", ("--runs", "2"), runs=2)  # the second run of each item


def read_only_judge(tmp):
    return _read_only(tmp, "judge")


def read_only_report(tmp):
    return _read_only(tmp, "report")


def read_only_decay(tmp):
    return _read_only(tmp, "decay")


# -- round three: odd and busy servers (the model endpoint) ---------------------------------
class CatchAllGateway(OpenAILoopback):
    """A gateway that answers every path (its /tokenize too) with a chat completion."""

    def route(self, method, path, headers, raw):  # type: ignore[no-untyped-def]
        if path.split("?")[0] == "/tokenize":
            path = "/v1/chat/completions"
            raw = json.dumps({"model": "m", "messages": [{"role": "user", "content": "a"}]})
        return super().route(method, path, headers, raw.encode() if isinstance(raw, str) else raw)


def server_answers_tokenize_with_a_chat(tmp):
    meta = _bench(tmp, GOOD)

    def check(out: str) -> None:  # decided once: one warning, the words fallback labelled
        assert out.count("no token count") == 1
        m = json.loads((tmp / "run" / "manifest.json").read_text())
        assert m["token_counter"] == "fallback-words" and m["length_unit"] == "words"

    return Case(_run_args(meta, tmp), ["answers /tokenize with no token count", "in words"],
                good=("g1", "g2"), check=check,
                server=lambda: CatchAllGateway(reply=lambda b: "<answer>A</answer>"))  # fmt: skip


class ResetsFirst(OpenAILoopback):
    """Closes the connection unanswered on the first ``n`` model calls (a busy server with a
    full listen backlog), then answers."""

    def __init__(self, n: int, **kw: Any):
        super().__init__(**kw)
        self.resets, self.left = 0, n

    def route(self, method, path, headers, raw):  # type: ignore[no-untyped-def]
        from cafe.testing.loopback import _Dropped

        if path.split("?")[0] == "/v1/chat/completions" and self.left > 0:
            self.left -= 1
            self.resets += 1
            raise _Dropped
        return super().route(method, path, headers, raw)


def server_resets_a_burst(tmp):
    """A busy server (a full listen backlog) resets connections while it answers the rest:
    backed off and retried, never taken for a dead one (three resets in a row stopped the run
    before)."""
    meta = _bench(tmp, GOOD)
    srv: list[ResetsFirst] = []

    def server() -> ResetsFirst:
        srv.append(ResetsFirst(5, reply=lambda b: "<answer>A</answer>"))
        return srv[0]

    def check(out: str) -> None:
        assert srv[0].resets == 5 and srv[0].count == 2  # each item retried until answered
        assert json.loads((tmp / "run" / "manifest.json").read_text())["status"] == "complete"

    return Case(_run_args(meta, tmp), [], good=("g1", "g2"), check=check, server=server)


def server_500_to_everything(tmp):
    meta = _bench(tmp, GOOD)
    srv: list[OpenAILoopback] = []

    def server() -> OpenAILoopback:
        srv.append(OpenAILoopback(faults=lambda i, b: "500"))
        return srv[0]

    def check(out: str) -> None:  # stopped by the breaker (errors with replies count too)
        m = json.loads((tmp / "run" / "manifest.json").read_text())
        assert m["status"] == "stopped" and "no good reply" in m["error"]

    return Case(_run_args(meta, tmp), ["no good reply from", "(set by --endpoint)",
                                       "run the same command again"], 1, check=check,
                server=server)  # fmt: skip


def server_refuses_connections(tmp):
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    meta = _bench(tmp, GOOD)
    args = [url if a == "{url}" else a for a in _run_args(meta, tmp)]
    # the tokenizer probe goes through the breaker too: stopped before any model call
    return Case(args, [url, "(set by --endpoint)", "stopped before any call"], 1)


def endpoint_not_a_url(tmp):
    meta = _bench(tmp, GOOD)
    args = ["localhost:8000" if a == "{url}" else a for a in _run_args(meta, tmp)]
    return Case(args, ["--endpoint 'localhost:8000' is not a URL", "http://"], 1)


def endpoint_port_out_of_range(tmp):
    meta = _bench(tmp, GOOD)
    args = ["http://127.0.0.1:99999/v1" if a == "{url}" else a for a in _run_args(meta, tmp)]
    return Case(args, ["--endpoint 'http://127.0.0.1:99999/v1' is not a URL", "range"], 1)


class GzipBomb(OpenAILoopback):
    """Answers every model call with a small gzip body that inflates past the reply cap."""

    def route(self, method, path, headers, raw):  # type: ignore[no-untyped-def]
        if path.split("?")[0] != "/v1/chat/completions":
            return super().route(method, path, headers, raw)
        self._next_fault({})
        return 200, {"Content-Encoding": "gzip"}, _BOMB[0]


_BOMB: list[bytes] = []


def reply_gzip_bomb(tmp):
    import gzip

    if not _BOMB:  # 80 MB of zeros (past the 64 MB cap) in ~80 kB
        _BOMB.append(gzip.compress(b"\0" * (80 << 20), compresslevel=9))
    meta = _bench(tmp, GOOD)
    return Case(_run_args(meta, tmp), ["reply body larger than 64 MB"], 1, server=GzipBomb)


# -- round three: server replies not taken at face value -------------------------------------
def _strict_json(text: str) -> Any:
    def refuse(name: str) -> None:
        raise ValueError(f"{name} is not JSON")

    return json.loads(text, parse_constant=refuse)


def _first_replies(bad: dict, n: int = 2) -> Callable[[dict], Any]:
    """The first ``n`` model calls get ``bad`` as the whole body, the rest a good answer."""
    seen: list[int] = []

    def reply(body: dict) -> Any:
        seen.append(1)
        return bad if len(seen) <= n else "<answer>A</answer>"

    return reply


def _malformed_reply(tmp, bad: dict):
    """A malformed reply is a retryable server fault: each item is asked again and answered."""
    meta = _bench(tmp, GOOD)

    def check(out: str) -> None:
        m = _strict_json((tmp / "run" / "manifest.json").read_text())
        assert m["status"] == "complete" and m["usage"]["retries"] == 2, m["usage"]

    return Case(_run_args(meta, tmp), [], good=("g1", "g2"), reply=_first_replies(bad),
                check=check)  # fmt: skip


def reply_content_a_number(tmp):
    return _malformed_reply(tmp, {"choices": [{"message": {"content": 42}}]})


def reply_content_an_object(tmp):
    return _malformed_reply(tmp, {"choices": [{"message": {"content": {"text": "A"}}}]})


def reply_message_a_string(tmp):
    return _malformed_reply(tmp, {"choices": [{"message": "<answer>A</answer>"}]})


def _odd_usage(tmp, usage: Any):
    """Usage counts that are no counts are recorded unknown: never summed, never Infinity."""
    meta = _bench(tmp, GOOD)
    good = {"choices": [{"message": {"content": "<answer>A</answer>"}, "finish_reason": "stop"}],
            "usage": usage}  # fmt: skip

    def check(out: str) -> None:
        m = _strict_json((tmp / "run" / "manifest.json").read_text())
        assert m["status"] == "complete"
        assert m["usage"]["prompt_tokens"] == 0 and m["usage"]["completion_tokens"] == 0
        for line in (tmp / "run" / "predictions.jsonl").read_text().splitlines():
            _strict_json(line)

    return Case(_run_args(meta, tmp), [], good=("g1", "g2"), reply=lambda b: good, check=check)


def usage_a_list(tmp):
    return _odd_usage(tmp, [1, 2, 3])


def usage_strings(tmp):
    return _odd_usage(tmp, {"prompt_tokens": "12", "completion_tokens": "3"})


def usage_negative(tmp):
    return _odd_usage(tmp, {"prompt_tokens": -1000, "completion_tokens": -5})


def usage_huge(tmp):
    return _odd_usage(tmp, {"prompt_tokens": 1e308, "completion_tokens": 1e308})


# -- round three: every bad byte one clear line ---------------------------------------------
def _meta_text(tmp, bad: dict, says: list[str], good=("g1", "g2")):
    """GOOD plus item b (``bad`` merged in), as JSONL with ASCII escapes ("\\ud800")."""
    meta = _bench(tmp, [*GOOD, _item("b", **bad)])
    return Case(_run_args(meta, tmp), [str(meta), *says], good=good)


def meta_lone_surrogate(tmp):
    return _meta_text(tmp, {"question": "Which \ud800 is first?"},
                      ["sample b", "field question", "lone surrogate (U+D800)"])  # fmt: skip


def meta_nul_in_audio_path(tmp):
    return _meta_text(tmp, {"audio_path": "./audio/b\x00.wav"},
                      ["sample b", "field audio_path", "NUL character"])  # fmt: skip


def meta_nested_deep(tmp):
    deep: list = []
    for _ in range(200):
        deep = [deep]
    return _meta_text(tmp, {"notes": deep}, ["sample b", "field notes", "nested more than 64"])


def meta_nested_past_the_parser(tmp):
    meta = _bench(tmp, GOOD)
    meta.write_text(meta.read_text() + '{"id": "b", "x": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    return Case(_run_args(meta, tmp), [str(meta), "line 3", "nested more than"], good=("g1", "g2"))


def meta_audio_path_a_number(tmp):
    return _meta_text(tmp, {"audio_path": 42}, ["sample b", "field audio_path", "not a string"])


def meta_unicode_line_separators(tmp):
    """U+2028, U+2029 and U+0085 are valid inside a JSON line: nothing is dropped or warned."""
    first = _item("g1", question="Which\u2028is\u2029first\u0085?")
    meta = _bench(tmp, [first, GOOD[1]])
    meta.write_text("".join(json.dumps(i, ensure_ascii=False) + "\n" for i in [first, GOOD[1]]))

    def check(out: str) -> None:
        assert "not valid JSON" not in out

    return Case(_run_args(meta, tmp), [], good=("g1", "g2"), check=check)


def reply_lone_surrogate(tmp):
    """A reply holding a lone surrogate is written (as U+FFFD), not a lost batch."""
    meta = _bench(tmp, GOOD)

    def check(out: str) -> None:
        text = (tmp / "run" / "predictions.jsonl").read_text(encoding="utf-8")
        assert text.count("\ufffd") == 2

    return Case(_run_args(meta, tmp), [], good=("g1", "g2"), check=check,
                reply=lambda b: "<answer>A</answer> \ud800")  # fmt: skip


def _deep_json(depth: int = 200) -> str:
    return '{"x": ' + "[" * depth + "]" * depth + "}"


def manifest_nested_deep(tmp):
    return _damaged(tmp, "report", "manifest.json", _deep_json(), ["is damaged", "nested more"])


def metrics_nested_deep(tmp):
    return _damaged(tmp, "report", "metrics.json", _deep_json(100_000),
                    ["is damaged", "nested more"])  # fmt: skip


def prediction_nested_deep(tmp):
    return _edit_line(tmp, "report", "predictions.jsonl",
                      lambda r: r["sections"].update(x=json.loads(_deep_json())),
                      ["field sections", "nested more than 64"])  # fmt: skip


def prediction_lone_surrogate(tmp):
    return _edit_line(tmp, "report", "predictions.jsonl",
                      lambda r: r.update(raw_output="\ud800"),
                      ["field raw_output", "lone surrogate"])  # fmt: skip


def leaderboard_nested_deep(tmp):
    board = _yaml_file(tmp, "lb.yaml", "rows: " + "[" * 5000 + "]" * 5000 + "\n")
    return Case(["leaderboard", "show", "--leaderboard", str(board)],
                [str(board), "nested more than"], 1, keep=(board,))  # fmt: skip


def _captions_json(tmp, value: Any, says: list[str]):
    from test_judge_pipeline import build_run

    store = build_run(tmp / "jrun")
    caps = tmp / "caps.json"
    caps.write_text(json.dumps({"s0": "a dog barks", "s1": value}))
    return Case(["judge", str(store.root), "--judge", "openai-compatible", "--judge-model", "j",
                 "--judge-endpoint", "{url}", "--captions", str(caps), "--no-progress"],
                [str(caps), "sample s1", "field caption", *says], 1)  # fmt: skip


def captions_caption_null(tmp):
    return _captions_json(tmp, None, ["NoneType, not text"])


def captions_caption_a_list(tmp):
    return _captions_json(tmp, ["a dog"], ["list, not text"])


# -- round three: order-free numbers --------------------------------------------------------
def judgement_lines_shuffled(tmp):
    """A resumed run appends judgements in another order: the same judgements give the same
    bytes of every statistic (the bootstrap interval moved with the order before)."""
    import random

    from test_judge_pipeline import build_run

    store = build_run(tmp / "jrun", n=30)
    args = ["judge", str(store.root), "--judge", "rule", "--no-progress"]
    first = CliRunner().invoke(main, args)
    assert first.exit_code == 0, first.output
    keys = ("acc_per", "err_per", "err_use", "err_omit", "runs", "ci95", "pooled", "breakdowns")

    def numbers() -> str:
        section = json.loads((store.root / "metrics.json").read_text())["cafe"]
        return json.dumps({k: section[k] for k in keys}, sort_keys=True)

    before = numbers()
    for judged in store.root.glob("judgements*.jsonl"):
        lines = judged.read_text().splitlines()
        random.Random(1).shuffle(lines)
        judged.write_text("\n".join(lines) + "\n")

    def check(out: str) -> None:
        assert numbers() == before

    return Case(args, [], check=check)


KINDS: list[Callable[[Path], Case]] = [
    meta_empty, meta_truncated_json, meta_bad_line_in_middle, meta_duplicate_id,
    meta_answer_not_in_choices, meta_null_field, meta_wrong_type, meta_missing_id,
    meta_not_an_object, meta_missing_audio_field, meta_audio_outside_root, meta_wrong_benchmark,
    meta_not_utf8, meta_missing_file,
    audio_missing, audio_empty, audio_truncated_header, audio_not_audio, audio_nan_samples,
    audio_zero_hz, audio_two_hours, audio_8bit, audio_stereo_96k,
    preds_not_utf8, preds_not_a_list, preds_missing_key, preds_missing_id, preds_empty,
    judge_reply_not_json, judge_reply_missing_keys, judge_reply_wrong_types,
    captions_missing_caption, captions_json_not_object,
    recipe_not_yaml, cards_not_yaml, cards_missing_adapter, leaderboard_bad_row,
    # round two
    option_yaml_error_quotes_no_secret, option_unclosed_list, option_concurrency_not_a_number,
    option_extra_body_a_list, option_alias_bomb,
    cards_alias_bomb, cards_recursive_alias, cards_too_large, cards_alias_bomb_in_run,
    leaderboard_alias_bomb, leaderboard_recursive_alias, leaderboard_not_a_mapping,
    recipe_alias_bomb,
    meta_empty_answer, meta_blank_answer, meta_empty_choice_and_answer,
    meta_empty_choice_beside_the_answer,
    manifest_garbage, manifest_empty, manifest_a_list, manifest_a_folder, manifest_not_utf8,
    metrics_garbage, metrics_empty, metrics_a_list, metrics_a_folder,
    samples_garbage_line, samples_lines_are_lists, samples_a_folder, samples_missing_question,
    prediction_missing_run_index, prediction_run_index_a_string, prediction_sections_a_list,
    prediction_output_a_number, prediction_line_not_utf8, judgement_events_a_string,
    report_is_a_file,
    out_name_too_long, out_is_a_file, out_under_a_file, cache_env_names_a_file,
    cache_file_not_a_database, strict_stop_is_recorded,
    report_link_leaves_the_folder, report_file_link_leaves_the_folder,
    embed_audio_outside_the_data, csv_formula_in_a_model_name,
    disk_full_during_run, disk_full_during_report,
    read_only_run, read_only_judge, read_only_report, read_only_decay,
]  # fmt: skip
KINDS += [  # round three: odd, busy and dead servers; server replies; bad bytes; line order
    server_answers_tokenize_with_a_chat, server_resets_a_burst, server_500_to_everything,
    server_refuses_connections, endpoint_not_a_url, endpoint_port_out_of_range, reply_gzip_bomb,
    reply_content_a_number, reply_content_an_object, reply_message_a_string,
    usage_a_list, usage_strings, usage_negative, usage_huge,
    meta_lone_surrogate, meta_nul_in_audio_path, meta_nested_deep, meta_nested_past_the_parser,
    meta_audio_path_a_number, meta_unicode_line_separators, reply_lone_surrogate,
    manifest_nested_deep, metrics_nested_deep, prediction_nested_deep, prediction_lone_surrogate,
    leaderboard_nested_deep, captions_caption_null, captions_caption_a_list,
    judgement_lines_shuffled,
]  # fmt: skip


def test_the_corpus_has_at_least_70_kinds():
    assert len(KINDS) >= 70 and len({k.__name__ for k in KINDS}) == len(KINDS)


def isolate(monkeypatch, tmp_path) -> None:
    """The test's own cache and a small rule vocabulary (every round of the corpus)."""
    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(
        "cafe.judge.rule.default_vocabulary",
        lambda: {"dog_bark": ["dog barks", "bark"], "bell": ["church bell"], "rain": ["rainfall"]},
    )


@pytest.fixture(autouse=True)
def _isolated(monkeypatch, tmp_path):
    isolate(monkeypatch, tmp_path)


def run_kind(kind: Callable[[Path], Case], tmp_path: Path, monkeypatch) -> None:
    """Build one kind's case, check it, and clean up after it (pass or fail)."""
    case = kind(tmp_path)
    try:
        _check_case(case, tmp_path, monkeypatch)
    finally:
        if case.cleanup:
            case.cleanup()


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.__name__)
def test_bad_input_is_one_line_and_loses_nothing(kind, tmp_path, monkeypatch):
    run_kind(kind, tmp_path, monkeypatch)


def _check_case(case: Case, tmp_path: Path, monkeypatch) -> None:
    for k, v in case.env.items():
        monkeypatch.setenv(k, v)
    server_reply = case.reply or (lambda b: "<answer>A</answer>")
    before = {p: p.read_bytes() for p in case.keep}
    existing = {
        p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file() and not p.is_symlink()
    }
    with case.server() if case.server else OpenAILoopback(reply=server_reply) as srv:
        args = [a.replace("{url}", srv.url) for a in case.args]
        r = CliRunner().invoke(main, args)
    out = r.output
    assert "Traceback" not in out and not isinstance(r.exception, (KeyError, TypeError,
                                                                   AttributeError))  # fmt: skip
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    assert r.exit_code == case.exit_code, out
    if case.says:
        lines = [x for x in out.splitlines() if all(s in x for s in case.says)]
        assert lines, f"no single line says {case.says}:\n{out}"
    if case.good:
        preds = {
            json.loads(x)["sample_id"]: json.loads(x)
            for x in (tmp_path / "run" / "predictions.jsonl").read_text().splitlines()
        }
        for sid in case.good:  # every good item was processed (and the model answered it)
            assert preds[sid]["parse_status"] == "ok" and preds[sid]["correct"], (sid, out)
    if case.check:
        case.check(out)
    for p, b in before.items():
        assert p.read_bytes() == b
    for p, b in existing.items():  # inputs and earlier results: never removed or rewritten,
        if p.suffix in (".json", ".jsonl", ".yaml", ".wav") and "jrun" not in p.parts:
            assert p.exists() and p.read_bytes() == b, p
    if case.resume:  # the fault undone (space freed, writable again), the same command finishes
        assert case.restore is not None
        case.restore()
        r = CliRunner().invoke(main, case.resume)
        assert r.exit_code == 0 and "Traceback" not in r.output, r.output
        if case.resumed:
            case.resumed()
