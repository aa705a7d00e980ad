"""Audio attention tracing on tiny checkpoints: shapes, ratios in [0, 1] that match a full
eager forward computed by hand, and a per-token memory of one float per layer."""

from __future__ import annotations

import pytest
import torch  # noqa: F401  (needed installed: fail, never skip)
import transformers  # noqa: F401  (needed installed: fail, never skip)

pytest.register_assert_rewrite("hf_tiny_fixtures")

from hf_tiny_fixtures import make_request  # noqa: E402

from cafe.adapters.hf.attention import trace_audio_attention  # noqa: E402

pytest_plugins = ["hf_tiny_fixtures"]


@pytest.mark.parametrize("family", ["qwen2-audio", "qwen2.5-omni"])
def test_trace_shapes_ratios_and_memory(family, tiny_adapter, clips):

    adapter = tiny_adapter(family)
    request = make_request("t", clips["tone"], "What sound?", max_new_tokens=5)
    trace = trace_audio_attention(adapter, request)
    n_layers = adapter.model.config.get_text_config().num_hidden_layers

    # one row per generated token (the random model may stop before the 5 allowed)
    assert len(trace.ratios) == len(trace.tokens) and 1 <= len(trace.tokens) <= 5
    assert all(len(row) == n_layers for row in trace.ratios)
    assert all(0.0 <= x <= 1.0 for row in trace.ratios for x in row)
    assert trace.bytes_per_token == 4 * n_layers  # one float32 per layer, never a map
    # 2 s of audio -> 50 audio tokens for both families' encoders
    inputs = adapter.prepare_requests([request])
    ids = inputs["input_ids"][0]
    assert trace.audio_positions == (ids == adapter.audio_token_id).nonzero().flatten().tolist()
    assert len(trace.audio_positions) == 50
    # the traced run generates what a plain greedy run generates
    plain = adapter.generate([request])[0]
    assert trace.text == plain.text
    assert adapter.model.config._attn_implementation != "eager"  # restored after tracing

    # first generated token, by hand: full eager forward, last query row, audio keys
    adapter.model.set_attn_implementation("eager")
    try:
        with torch.inference_mode():
            out = adapter.model(**inputs, output_attentions=True)
    finally:
        adapter.model.set_attn_implementation("sdpa")
    attn = [a for a in out.attentions if a is not None][-n_layers:]
    pos = torch.tensor(trace.audio_positions)
    expected = [float(a[0, :, -1, pos].sum(-1).mean()) for a in attn]
    assert trace.ratios[0] == pytest.approx(expected, abs=1e-5)
    assert trace.per_token()[0] == pytest.approx(sum(expected) / n_layers, abs=1e-5)


def test_trace_rejects_a_prompt_without_audio(tiny_adapter):
    adapter = tiny_adapter("qwen2-audio")
    request = make_request("t", "/unused.wav", "x")
    request.messages = [{"role": "user", "content": "no audio here"}]
    request.audio = []
    with pytest.raises(ValueError, match="no audio tokens"):
        trace_audio_attention(adapter, request, max_new_tokens=2)
