"""The synth benchmark: deterministic, balanced, well-formed, and its audio really holds what its
events say (measured from the waveform with this file's own DSP, not the generator's or the
reference adapter's)."""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from cafe import synth_vocabulary as V
from cafe.audio import load_audio
from cafe.benchmarks import BENCHMARKS
from cafe.benchmarks.cli import bench_command
from cafe.benchmarks.synth import SynthBenchmark, load_folder
from cafe.benchmarks.synth.generator import GENERATOR_VERSION, generate

SR = 16_000
N = 45  # three items per (dimension, difficulty) cell


@pytest.fixture(scope="module")
def bench(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("synth")
    generate(out, n=N, seed=7)
    return out


@pytest.fixture(scope="module")
def samples(bench):
    return load_folder(bench).samples


# --------------------------------------------------------------------------- determinism


def _tree_bytes(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def test_same_seed_gives_identical_bytes_and_other_seed_differs(tmp_path):
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    generate(a, n=15, seed=3)
    generate(b, n=15, seed=3)
    generate(c, n=15, seed=4)
    ta, tb, tc = _tree_bytes(a), _tree_bytes(b), _tree_bytes(c)
    assert ta == tb
    assert len(ta) == 15 + 2  # wavs + synth.jsonl + synth-info.json
    assert ta["synth.jsonl"] != tc["synth.jsonl"]
    differing = [k for k in ta if k.endswith(".wav") and ta[k] != tc[k]]
    assert len(differing) == 15


def test_items_do_not_depend_on_n(tmp_path):
    generate(tmp_path / "small", n=4, seed=3)
    generate(tmp_path / "big", n=9, seed=3)
    small = (tmp_path / "small" / "synth.jsonl").read_text().splitlines()
    big = (tmp_path / "big" / "synth.jsonl").read_text().splitlines()
    assert big[:4] == small
    # regenerating a smaller set into the same folder leaves no stale clips behind
    generate(tmp_path / "big", n=4, seed=3)
    assert _tree_bytes(tmp_path / "big") == _tree_bytes(tmp_path / "small")


# --------------------------------------------------------------------------- schema and balance


def test_balanced_and_well_formed(bench, samples):
    assert len(samples) == N
    cells = Counter((s.meta["dimension"], s.meta["difficulty"]) for s in samples)
    assert set(cells) == {(d, f) for d in V.DIMENSIONS for f in V.DIFFICULTIES}
    assert set(cells.values()) == {3}
    positions = Counter()
    for s in samples:
        assert s.meta["modality"] == "sound"
        assert len(s.choices) == 4 and len(set(s.choices)) == 4
        assert s.answer in s.choices
        positions[s.choices.index(s.answer)] += 1
        assert s.events and any(e.required for e in s.events)
        assert all(e.label in V.SOURCES for e in s.events)
        assert all(0 <= e.onset < e.offset <= s.meta["duration"] for e in s.events)
        assert s.caption and "\n" not in s.caption
        # the caption narrates events in time order: first event's onset appears first
        first = min(s.events, key=lambda e: e.onset)
        assert f"{first.onset:.2f} s" in s.caption
        assert Path(s.audio[0]).exists()
    # answers are spread over positions (not always the same slot)
    assert len(positions) >= 3


def test_answers_follow_from_the_events(samples):
    for s in samples:
        req = sorted((e for e in s.events if e.required), key=lambda e: e.onset)
        dim = s.meta["dimension"]
        if dim == "counting":
            assert int(s.answer) == len(req)
            assert len({e.label for e in req}) == 1
            assert all(e.label != req[0].label for e in s.events if not e.required)
        elif dim == "pitch":
            assert len(req) == 1 and req[0].attributes["pitch"] == s.answer
        elif dim == "rhythm":
            iois = np.diff([e.onset for e in req])
            cv = np.std(iois) / np.mean(iois)
            regular = "irregular" not in s.answer
            assert (cv < 0.01) if regular else (cv >= 0.2)
            assert s.answer.startswith("fast" if np.median(iois) < 0.45 else "slow")
        elif dim == "temporal":
            order = [e.label for e in req]
            q = s.question
            if "first" in q:
                assert s.answer == order[0]
            elif "last" in q:
                assert s.answer == order[-1]
            else:
                ref = V.label_for_word(q.split(" the ")[-1])
                i = order.index(ref)
                assert s.answer == order[i + 1 if "after" in q else i - 1]
        else:
            assert len(req) == 1 and req[0].label == s.answer
            m = re.search(r"between (\d+\.\d+) s and (\d+\.\d+) s", s.question)
            if s.meta["difficulty"] == "easy":
                assert m is None and len(s.events) == 1
                continue
            a, b = float(m.group(1)), float(m.group(2))
            assert req[0].onset < a < b < req[0].offset, s.id
            # no other event reaches into the asked window
            assert all(e.offset <= a or e.onset >= b for e in s.events if not e.required), s.id


# --------------------------------------------------------------------------- audio vs events


def _energy_db(x: np.ndarray) -> float:
    return 10 * np.log10(np.mean(x.astype(np.float64) ** 2) + 1e-12)


def _peak_freq(x: np.ndarray) -> float:
    n = 1 << 15
    spec = np.abs(np.fft.rfft(x * np.hanning(len(x)), n))
    return float(np.argmax(spec[int(60 * n / SR) :]) + int(60 * n / SR)) * SR / n


def _clean(s, ev) -> bool:
    """No other event overlaps ``ev`` (within 20 ms)."""
    return all(
        o is ev or o.offset <= ev.onset - 0.02 or o.onset >= ev.offset + 0.02 for o in s.events
    )


def test_energy_inside_events_stands_above_the_gaps(samples):
    for s in samples:
        x = load_audio(s.audio[0])
        outside = np.ones(len(x), bool)
        for e in s.events:
            outside[max(0, int((e.onset - 0.03) * SR)) : int((e.offset + 0.03) * SR)] = False
        gaps_db = _energy_db(x[outside])
        for e in s.events:
            inside = x[int((e.onset + 0.012) * SR) : int((e.offset - 0.012) * SR)]
            expect = s.meta["snr_db"] + e.attributes["level_db"]  # event power over the hiss
            got = _energy_db(inside) - gaps_db
            assert got > expect - 3, (s.id, e.label, got, expect)
        # and the gaps are quiet everywhere: no 50 ms stretch there is loud
        gx = x[outside]
        w = len(gx) // 800 * 800
        frames = 10 * np.log10(np.mean(gx[:w].reshape(-1, 800).astype(float) ** 2, 1) + 1e-12)
        assert frames.max() - gaps_db < 2.0, s.id


def test_dominant_frequency_and_pitch_direction_match_attributes(samples):
    checked = Counter()
    for s in samples:
        x = load_audio(s.audio[0])
        for e in s.events:
            if e.label not in ("tone", "buzz", "chirp") or not _clean(s, e):
                continue
            seg = x[int(e.onset * SR) : int(e.offset * SR)]
            a = e.attributes
            pitch = a.get("pitch", "flat")
            q = len(seg) // 4
            f_first, f_mid, f_last = (
                _peak_freq(seg[:q]),
                _peak_freq(seg[int(1.5 * q) : int(2.5 * q)]),
                _peak_freq(seg[-q:]),
            )
            if pitch == "flat":
                assert abs(_peak_freq(seg) / a["f0"] - 1) < 0.02, (s.id, e)
            elif pitch == "rising":
                assert f_last > f_first * 1.15, (s.id, e, f_first, f_last)
            elif pitch == "falling":
                assert f_first > f_last * 1.15, (s.id, e, f_first, f_last)
            else:
                assert f_mid > 1.1 * max(f_first, f_last), (s.id, e, f_first, f_mid, f_last)
            if e.label == "chirp":  # a chirp sweeps over more than an octave
                ratio = max(f_first, f_last) / min(f_first, f_last)
                assert ratio > 2.0, (s.id, e, f_first, f_last)
            checked[pitch] += 1
    assert checked["flat"] and checked["rising"] and checked["falling"]


def test_sources_have_their_spectral_and_temporal_signature(samples):
    seen = set()
    for s in samples:
        x = load_audio(s.audio[0]).astype(np.float64)
        for e in s.events:
            if not _clean(s, e) or e.offset - e.onset < 0.1:
                continue
            seg = x[int((e.onset + 0.015) * SR) : int((e.offset - 0.015) * SR)]
            spec = np.abs(np.fft.rfft(seg * np.hanning(len(seg)))) ** 2 + 1e-20
            band = spec[int(200 * len(seg) / SR) : int(6000 * len(seg) / SR)]
            flatness = np.exp(np.mean(np.log(band))) / np.mean(band)
            kurt = np.mean((seg - seg.mean()) ** 4) / np.var(seg) ** 2
            if e.label == "noise burst":
                assert flatness > 0.3 and kurt < 4, (s.id, flatness, kurt)
            elif e.label == "click train":
                assert kurt > 6, (s.id, kurt)
                env = np.abs(seg) - np.abs(seg).mean()
                ac = np.correlate(env, env, "full")[len(env) - 1 :]
                lag = np.argmax(ac[SR // 100 : SR // 20]) + SR // 100
                assert abs(SR / lag / e.attributes["rate_hz"] - 1) < 0.05, (s.id, SR / lag)
            elif e.label == "tone":
                assert flatness < 0.2 and kurt < 2.5, (s.id, flatness, kurt)
            elif e.label == "buzz" and e.attributes["pitch"] == "flat":
                f0 = e.attributes["f0"]
                k1, k3 = (int(round(h * f0 * len(seg) / SR)) for h in (1, 3))
                h1, h3 = spec[k1 - 2 : k1 + 3].sum(), spec[k3 - 2 : k3 + 3].sum()
                # square wave: third harmonic at 1/3 amplitude (-9.5 dB)
                assert -13 < 10 * np.log10(h3 / h1) < -6, (s.id, 10 * np.log10(h3 / h1))
            seen.add(e.label)
    assert seen == set(V.LABELS)


def _onsets(x: np.ndarray, floor_db: float) -> list[float]:
    hop = 160
    n = len(x) // hop
    e = np.mean(x[: n * hop].astype(np.float64).reshape(n, hop) ** 2, axis=1)
    db = 10 * np.log10(np.convolve(e, np.ones(3) / 3, "same") + 1e-12)
    active = db > floor_db
    # join gaps shorter than 60 ms (click trains dip between clicks)
    idx = np.flatnonzero(active)
    onsets, last = [], -100
    for i in idx:
        if i - last > 6:
            onsets.append(i * hop / SR)
        last = i
    return onsets


def test_onset_counts_match_counting_and_rhythm_items(samples):
    checked = 0
    for s in samples:
        if s.meta["dimension"] not in ("counting", "rhythm") or s.meta["difficulty"] == "hard":
            continue
        x = load_audio(s.audio[0])
        noise_db = _energy_db(x[: int(min(e.onset for e in s.events) * SR) - 160])
        found = _onsets(x, noise_db + 4)
        want = sorted(e.onset for e in s.events)
        assert len(found) == len(want), (s.id, found, want)
        assert np.max(np.abs(np.array(found) - np.array(want))) < 0.03, s.id
        if s.meta["dimension"] == "counting":
            assert sum(e.required for e in s.events) == int(s.answer)
        checked += 1
    assert checked >= 8


# --------------------------------------------------------------------------- loading, cache, CLI


def test_load_registers_version_and_hash(bench):
    lb = BENCHMARKS.get("synth")().load(str(bench))
    body = (bench / "synth.jsonl").read_bytes()
    assert lb.sha256 == hashlib.sha256(body).hexdigest()
    assert lb.version == f"synth-v{GENERATOR_VERSION}-n{N}-seed7"
    assert lb.problems == []
    s = lb.samples[0]
    assert SynthBenchmark.breakdowns["dimension"](s) == "counting"
    assert SynthBenchmark.breakdowns["difficulty"](s) == "easy"
    assert Path(s.audio[0]).is_absolute()
    assert all(isinstance(e.required, bool) for e in s.events)


def test_load_without_data_generates_into_cache_once(tmp_path, monkeypatch):
    monkeypatch.setenv("CAFE_CACHE", str(tmp_path))
    lb = SynthBenchmark().load(version="n6-seed2")
    folder = tmp_path / "synth" / f"n6-seed2-v{GENERATOR_VERSION}"
    assert Path(lb.source) == folder / "synth.jsonl"
    assert len(lb.samples) == 6
    mtime = (folder / "synth.jsonl").stat().st_mtime_ns
    again = SynthBenchmark().load(version="n6-seed2")
    assert (folder / "synth.jsonl").stat().st_mtime_ns == mtime
    assert again.sha256 == lb.sha256
    assert [p.name for p in (tmp_path / "synth").iterdir()] == [folder.name]  # no temp left
    with pytest.raises(Exception, match="n<N>-seed<S>"):
        SynthBenchmark().load(version="latest")


def test_bad_lines_become_problems_and_the_rest_loads(tmp_path):
    generate(tmp_path, n=3, seed=1)
    path = tmp_path / "synth.jsonl"
    recs = [json.loads(line) for line in path.read_text().splitlines()]
    no_question = dict(recs[1], id="synth-x")
    del no_question["question"]
    wrong_answer = dict(recs[2], id="synth-y", answer="not a choice")
    lines = [
        json.dumps(recs[0]),
        "{broken",
        json.dumps(no_question),
        json.dumps(wrong_answer),
        json.dumps(recs[0]),  # duplicate id
        json.dumps(recs[1]),
    ]
    path.write_text("\n".join(lines) + "\n")
    lb = load_folder(tmp_path)
    msgs = [str(p) for p in lb.problems]
    assert [s.id for s in lb.samples] == ["synth-00000", "synth-y", "synth-00001"]
    assert lb.samples[1].error and "answer" in lb.samples[1].error
    assert any(m.startswith(str(path)) and "line 2: not valid JSON" in m for m in msgs)
    assert any("sample synth-x: field question: line 3: missing" in m for m in msgs)
    assert any("sample synth-y: field answer:" in m for m in msgs)
    assert any("sample synth-00000: field id: line 5: duplicate id" in m for m in msgs)


def test_cli_writes_the_benchmark(tmp_path):
    res = CliRunner().invoke(
        bench_command, ["synth", "--out", str(tmp_path), "--limit", "5", "--seed", "9"]
    )
    assert res.exit_code == 0, res.output
    assert len((tmp_path / "synth.jsonl").read_text().splitlines()) == 5
    assert len(list((tmp_path / "audio").glob("*.wav"))) == 5
    info = json.loads((tmp_path / "synth-info.json").read_text())
    assert info["seed"] == 9 and info["n"] == 5
    assert info["sha256"] == hashlib.sha256((tmp_path / "synth.jsonl").read_bytes()).hexdigest()
    bad = CliRunner().invoke(bench_command, ["synth", "--out", str(tmp_path), "--limit", "0"])
    assert bad.exit_code == 2 and "--limit must be at least 1" in bad.output
    # the old spelling still works, with a deprecation note
    old = CliRunner().invoke(bench_command, ["synth", "--out", str(tmp_path), "--n", "0"])
    assert old.exit_code == 2 and "--limit must be at least 1" in old.output
    assert "note: --n is deprecated, use --limit" in old.output


def test_vocabulary_maps_synonyms_to_labels():
    assert V.label_for_word("How many times does the beep sound?") == "tone"
    assert V.label_for_word("the square wave") == "buzz"
    assert V.label_for_word("a hiss") == "noise burst"
    assert V.label_for_word("the clicking") == "click train"
    assert V.label_for_word("nothing here") is None
    assert V.labels_in("a chirp, then a buzz and a tone") == ["chirp", "buzz", "tone"]


@pytest.mark.parametrize("first", ["cafe.benchmarks.spoken", "cafe.benchmarks.synth", "cafe.cli"])
def test_each_generated_benchmark_imports_first_in_a_fresh_process(first):
    """Whichever module a process imports first, both generated benchmarks load from the
    registry (spoken imported before synth once failed as a circular import, so `cafe run
    --bench spoken` could not start)."""
    import subprocess
    import sys

    code = (f"import {first}\nfrom cafe.benchmarks import BENCHMARKS\n"
            "print(BENCHMARKS.get('spoken').name, BENCHMARKS.get('synth').name)")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["spoken", "synth"]
