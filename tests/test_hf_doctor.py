"""`cafe doctor`'s check: a real adapter hears its audio; one that drops audio is flagged."""

from __future__ import annotations

import numpy as np
import pytest
import torch  # noqa: F401  (needed installed: fail, never skip)
import transformers  # noqa: F401  (needed installed: fail, never skip)

pytest.register_assert_rewrite("hf_tiny_fixtures")

from hf_tiny_fixtures import make_request  # noqa: E402

from cafe.adapters.base import ModelCard  # noqa: E402
from cafe.adapters.hf.qwen2_audio import Qwen2AudioAdapter  # noqa: E402
from cafe.audio import load_audio  # noqa: E402
from cafe.runner.doctor import check_audio, silent_copy  # noqa: E402

pytest_plugins = ["hf_tiny_fixtures"]
CLIPS = ["tone", "noise44k"]


class AudioDroppingAdapter(Qwen2AudioAdapter):
    """The bug doctor exists for: the prompt loses its audio part on the way to the model."""

    def convert_messages(self, request):
        conv, _clips = super().convert_messages(request)
        for m in conv:
            m["content"] = [p for p in m["content"] if p["type"] != "audio"]
        return conv, []


def test_silent_copy_keeps_duration_and_zeroes_samples(clips, tmp_path):
    r = make_request("s", clips["noise44k"], "q")
    s = silent_copy(r, tmp_path)
    silent = load_audio(s.audio[0])
    assert len(silent) == len(load_audio(clips["noise44k"])) == 16_000
    assert not np.any(silent)
    assert s.messages[1]["content"][0]["path"] == s.audio[0]
    assert r.audio == [clips["noise44k"]]  # the original request is untouched


def test_doctor_passes_a_model_that_hears(tiny_adapter, clips):
    adapter = tiny_adapter("qwen2-audio")
    requests = [
        make_request(f"i{k}", clips[c], "What sound?") for k, c in enumerate(["tone", "noise44k"])
    ]
    report = check_audio(adapter, requests)
    assert report.logits_checked
    assert report.ok
    assert all(i.logit_diff > 1e-4 for i in report.items)
    assert report.lines()[-1].startswith("ok")


def test_doctor_flags_dropped_audio(tiny_checkpoints, clips):
    card = ModelCard(name="dropper", adapter="qwen2-audio")
    adapter = AudioDroppingAdapter(card, checkpoint=tiny_checkpoints("qwen2-audio"))
    requests = [
        make_request(f"i{k}", clips[c], "What sound?") for k, c in enumerate(["tone", "noise44k"])
    ]
    report = check_audio(adapter, requests)
    assert not report.ok
    assert all(not i.text_changed and i.logit_diff == 0.0 for i in report.items)
    assert "WARNING" in report.lines()[-1]


def test_doctor_without_logits_uses_outputs(tiny_adapter, tiny_checkpoints, clips):
    """Any adapter (API ones included) is judged on its generate() outputs alone."""

    class TextOnly:
        def __init__(self, inner):
            self.inner = inner

        def generate(self, requests):
            return self.inner.generate(requests)

    card = ModelCard(name="dropper", adapter="qwen2-audio")
    dropper = AudioDroppingAdapter(card, checkpoint=tiny_checkpoints("qwen2-audio"))
    requests = [make_request("i0", clips["tone"], "What sound?", max_new_tokens=8)]
    flagged = check_audio(TextOnly(dropper), requests)
    assert not flagged.logits_checked and not flagged.ok
