"""The bad-input corpus: each kind of bad input, given to the command that reads it, is one line
naming the file (and the sample id and field where there is an item), never a traceback; the
good items beside it are all processed; nothing already on disk is lost. KINDS counts them.

Runs use an OpenAI-compatible loopback server as the model, so every clip that gets past the
checks is really decoded and encoded the way an API model receives it."""

from __future__ import annotations

import json
import re
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

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
]  # fmt: skip


def test_the_corpus_has_at_least_30_kinds():
    assert len(KINDS) >= 30 and len({k.__name__ for k in KINDS}) == len(KINDS)


@pytest.fixture(autouse=True)
def _isolated(monkeypatch, tmp_path):
    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(
        "cafe.judge.rule.default_vocabulary",
        lambda: {"dog_bark": ["dog barks", "bark"], "bell": ["church bell"], "rain": ["rainfall"]},
    )


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.__name__)
def test_bad_input_is_one_line_and_loses_nothing(kind, tmp_path):
    case = kind(tmp_path)
    server_reply = case.reply or (lambda b: "<answer>A</answer>")
    before = {p: p.read_bytes() for p in case.keep}
    existing = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    with OpenAILoopback(reply=server_reply) as srv:
        args = [a.replace("{url}", srv.url) for a in case.args]
        r = CliRunner().invoke(main, args)
    out = r.output
    assert "Traceback" not in out and not isinstance(r.exception, (KeyError, TypeError,
                                                                   AttributeError))  # fmt: skip
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
    for p, b in before.items():
        assert p.read_bytes() == b
    for p, b in existing.items():  # inputs and earlier results: never removed or rewritten,
        if p.suffix in (".json", ".jsonl", ".yaml", ".wav") and "jrun" not in p.parts:
            assert p.exists() and p.read_bytes() == b, p
