"""Listening controls on real WAV files: silence of the same length, noise at the clip's level,
a seeded derangement that never returns an item's own clip, no audio for text-only; and the
listening gap with its paired interval on hand-made predictions."""

from __future__ import annotations

import numpy as np
import pytest

from cafe.audio import load_audio, write_wav
from cafe.controls import control_samples, derangement, parse_controls
from cafe.metrics.listening import listening_section
from cafe.records import Prediction, Sample


def make_samples(tmp_path, n=5, shared=()):
    rng = np.random.default_rng(0)
    out = []
    for i in range(n):
        path = tmp_path / f"clip{i}.wav"
        if i not in shared:
            write_wav(path, 0.1 * (i + 1) * np.sin(np.arange(8000 + 1600 * i) / 7.0))
        else:  # items in `shared` reuse clip0 (several questions on one clip)
            path = tmp_path / "clip0.wav"
        out.append(Sample(f"s{i}", "synth", "1", f"q{i}?", ["a", "b", "c", "d"], "a",
                          [str(path)], meta={"dimension": "x" if i < 3 else "y"}))  # fmt: skip
    rng.shuffle(out)
    return sorted(out, key=lambda s: s.id)


def test_parse_controls():
    assert parse_controls("silence, noise") == ["silence", "noise"]
    assert parse_controls("all") == ["silence", "noise", "shuffled", "text-only"]
    with pytest.raises(ValueError, match="unknown control"):
        parse_controls("silence,loud")


def test_silence_and_noise_keep_length_and_level(tmp_path):
    samples = make_samples(tmp_path)
    sil = control_samples(samples, "silence", folder=tmp_path / "ctl")
    noi = control_samples(samples, "noise", seed=7, folder=tmp_path / "ctl")
    for s, a, b in zip(samples, sil, noi, strict=True):
        x = load_audio(s.audio[0])
        quiet, loud = load_audio(a.audio[0]), load_audio(b.audio[0])
        assert len(quiet) == len(x) == len(loud)
        assert np.max(np.abs(quiet)) == 0.0
        rms = lambda v: float(np.sqrt(np.mean(v.astype(np.float64) ** 2)))  # noqa: E731
        assert rms(loud) == pytest.approx(rms(x), rel=0.05)  # 16-bit WAV, >= 8000 samples
        assert (a.id, a.question, a.answer) == (s.id, s.question, s.answer)
    again = control_samples(samples, "noise", seed=7, folder=tmp_path / "ctl2")
    assert np.array_equal(load_audio(again[0].audio[0]), load_audio(noi[0].audio[0]))
    other = control_samples(samples, "noise", seed=8, folder=tmp_path / "ctl2")
    assert not np.array_equal(load_audio(other[0].audio[0]), load_audio(noi[0].audio[0]))


def test_shuffled_is_a_seeded_derangement_and_text_only_drops_audio(tmp_path):
    samples = make_samples(tmp_path, n=6, shared=(3,))  # s0 and s3 share clip0
    shuf = control_samples(samples, "shuffled", seed=1)
    own = {s.id: s.audio for s in samples}
    assert all(t.audio != own[t.id] for t in shuf)  # s3 never gets clip0 either
    assert sorted(a for t in shuf for a in t.audio) == sorted(a for s in samples for a in s.audio)
    assert [t.audio for t in control_samples(samples, "shuffled", seed=1)] == [
        t.audio for t in shuf
    ]
    assert all(t.audio == [] for t in control_samples(samples, "text-only"))
    for seed in range(20):
        keys = ["a", "a", "b", "c", "c", "d", "e"]
        src = derangement(keys, seed)
        assert sorted(src) == list(range(7))
        assert all(keys[src[i]] != keys[i] for i in range(7))


def test_bad_clip_fails_its_item_only(tmp_path):
    samples = make_samples(tmp_path, n=3)
    (tmp_path / "clip1.wav").write_bytes(b"not audio")
    out = control_samples(samples, "silence", folder=tmp_path / "ctl")
    assert out[1].error and "clip1.wav" in out[1].error and "s1" in out[1].error
    assert out[0].error is None and out[2].error is None


def preds(correct: dict[str, list[bool]]) -> list[Prediction]:
    return [Prediction(sid, r, "m", "s", "h", "x", correct=c)
            for sid, cs in correct.items() for r, c in enumerate(cs)]  # fmt: skip


def test_listening_gap_hand_case(tmp_path):
    samples = make_samples(tmp_path, n=4)
    real = preds(
        {"s0": [True, True], "s1": [True, False], "s2": [True, True], "s3": [False, False]}
    )
    # control: s2 has only run 0 (run 1 missing: wrong), s3 right once
    ctrl = preds({"s0": [False, False], "s1": [True, False], "s2": [True], "s3": [False, True]})
    by_dim = {"dimension": lambda s: s.meta["dimension"]}
    controls = {"silence": {"predictions": ctrl, "run_dir": "c"}}
    sec = listening_section(samples, real, controls, by_dim, resamples=2000)
    c = sec["controls"]["silence"]
    # real per item 100, 50, 100, 0 -> 62.5; control 0, 50, 50, 50 -> 37.5; gap 25
    assert (c["real_acc"], c["acc"], c["gap"], c["n"]) == (62.5, 37.5, 25.0, 4)
    # item differences 100, 0, 50, -50: every resample mean lies in [-50, 100]
    assert -50 <= c["ci95"][0] < 25 < c["ci95"][1] <= 100
    x = c["breakdowns"]["dimension"]["x"]  # s0, s1, s2: real 250/3, control 100/3
    assert x["gap"] == pytest.approx(50.0) and x["n"] == 3
    assert c["breakdowns"]["dimension"]["y"]["gap"] == -50.0
    assert sec["chance"] == 25.0


def test_judges_get_what_the_model_got(tmp_path):
    from cafe.controls import SILENT_TRUTH, control_captions
    from cafe.judge.base import JudgeItem
    from cafe.judge.rule import RuleJudge
    from cafe.records import Event

    samples = make_samples(tmp_path, n=3)
    for i, s in enumerate(samples):
        s.events = [Event(0.0, 1.0, ["dog_bark", "bell", "siren"][i], required=True)]
        s.caption = f"caption of {s.id}"
    sil = control_samples(samples, "silence", folder=tmp_path / "ctl")
    assert all(t.events == [] and t.caption == SILENT_TRUTH["silence"] for t in sil)
    assert all(t.meta["no_sound"] for t in sil) and "no_sound" not in samples[0].meta
    shuf = control_samples(samples, "shuffled", seed=2)
    for t in shuf:
        src = next(s for s in samples if s.audio == t.audio)
        assert src.id != t.id and t.caption == src.caption
        assert [e.label for e in t.events] == [e.label for e in src.events]
        assert not any(e.required for e in t.events)
    caps = control_captions(samples, "shuffled", 2, {s.id: f"file {s.id}" for s in samples})
    assert caps == {t.id: f"file {next(s for s in samples if s.audio == t.audio).id}" for t in shuf}
    assert set(control_captions(samples, "noise", 0, {}).values()) == {SILENT_TRUTH["noise"]}
    # under silence a reported dog bark is a hallucination, not a match
    pred = Prediction(sil[0].id, 0, "m", "lalm", "h", "A dog barks, so the answer is a.")
    j = RuleJudge(vocabulary={"dog_bark": ["dog bark", "dog barks"]}).judge(
        JudgeItem(sil[0], pred, None)
    )
    assert j.status == "ok" and j.error_matched == ["dog_bark"] and j.matched_events == []


def test_shuffled_draws_over_the_whole_benchmark(tmp_path):
    samples = make_samples(tmp_path, n=6)
    whole = {t.id: t.audio for t in control_samples(samples, "shuffled", seed=4)}
    first = control_samples(samples[:3], "shuffled", seed=4, pool=samples)
    assert [t.audio for t in first] == [whole[s.id] for s in samples[:3]]
