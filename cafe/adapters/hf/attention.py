"""Audio attention ratio (SPEC §4, Figure 6): for each generated token, the share of attention
mass on the input audio token positions, per decoder layer, averaged over heads.

Memory: a forward hook on every decoder self-attention reduces that layer's weights to one
number the moment they exist (the row of the query that predicts the next token, summed over
audio key positions, averaged over heads), so the trace keeps ``n_layers`` float32 values per
generated token and never a map. Tracing runs the model with eager attention (the only kind that
materialises weights), one request at a time, greedy."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cafe.records import Request


@dataclass
class AudioAttentionTrace:
    ratios: list[list[float]]  # [generated token][decoder layer], each in [0, 1]
    audio_positions: list[int]  # indices of the audio tokens in the prompt
    bytes_per_token: int  # what the trace stores per generated token
    tokens: list[int] = field(default_factory=list)  # generated ids, one per row of ratios
    text: str = ""
    step_bytes: int = 0  # largest attention tensor one decode step produced (freed at once)

    def per_token(self) -> list[float]:
        """Ratio per generated token averaged over layers (the Figure 6 curve)."""
        return [sum(r) / len(r) for r in self.ratios]

    def to_dict(self) -> dict[str, Any]:
        return {
            "ratios": self.ratios,
            "per_token": self.per_token(),
            "audio_positions": self.audio_positions,
            "bytes_per_token": self.bytes_per_token,
            "step_bytes": self.step_bytes,
            "tokens": self.tokens,
            "text": self.text,
        }


def decoder_attention_modules(model: Any) -> list[Any]:
    """The text decoder's self-attention modules, in layer order (audio/vision towers excluded)."""
    decoder = model.get_decoder()
    layers = getattr(decoder, "layers", None)
    if layers is None:  # composite models whose get_decoder returns a wrapper
        layers = getattr(getattr(decoder, "language_model", None), "layers", None)
    if layers is None:
        raise ValueError(f"{type(model).__name__}: cannot find the decoder layers to trace")
    return [layer.self_attn for layer in layers]


def trace_audio_attention(
    adapter: Any, request: Request, max_new_tokens: int | None = None
) -> AudioAttentionTrace:
    """Generate greedily for ``request`` with a transformers adapter and trace, per generated
    token and decoder layer, the head-averaged attention mass on the audio positions."""
    import numpy as np
    import torch

    model = adapter.model
    inputs = adapter.prepare_requests([request])
    audio_id = adapter.audio_token_id
    if audio_id is None:
        raise ValueError(f"{adapter.card.name}: the model config names no audio token id")
    ids = inputs["input_ids"][0]
    audio_pos = (ids == audio_id).nonzero().flatten()
    if audio_pos.numel() == 0:
        raise ValueError(f"sample {request.sample_id}: the prompt holds no audio tokens")

    modules = decoder_attention_modules(model)
    n_layers = len(modules)
    current = np.full(n_layers, np.nan, dtype=np.float32)
    rows: list[np.ndarray] = []
    step_bytes = [0]

    def layer_hook(index: int):
        def hook(_module: Any, _args: Any, output: Any) -> None:
            weights = output[1] if isinstance(output, tuple) and len(output) > 1 else None
            if weights is None:
                return
            last = weights[0, :, -1, :]  # (heads, keys): the query that predicts the next token
            if weights.shape[2] == 1:
                step_bytes[0] = max(step_bytes[0], weights.numel() * weights.element_size())
            current[index] = last[:, audio_pos].float().sum(-1).mean().item()

        return hook

    def step_hook(_module: Any, _args: Any, _output: Any) -> None:
        rows.append(current.copy())  # one forward call = one generated token
        current[:] = np.nan

    previous = getattr(model.config, "_attn_implementation", None) or "sdpa"
    handles = [m.register_forward_hook(layer_hook(i)) for i, m in enumerate(modules)]
    handles.append(model.register_forward_hook(step_hook))
    gen = adapter.generation_kwargs({**request.generation, "temperature": 0})
    if max_new_tokens is not None:
        gen["max_new_tokens"] = max_new_tokens
    try:
        model.set_attn_implementation("eager")
        with torch.inference_mode():
            seqs = model.generate(**inputs, **gen, **adapter._special_ids())
    finally:
        for h in handles:
            h.remove()
        model.set_attn_implementation(previous)
    new = seqs[0, ids.shape[0] :].tolist()
    rows = rows[: len(new)]
    if rows and np.isnan(np.stack(rows)).any():
        raise RuntimeError(f"{type(model).__name__}: some decoder layers returned no weights")
    table = np.stack(rows) if rows else np.zeros((0, n_layers), dtype=np.float32)
    return AudioAttentionTrace(
        ratios=table.tolist(),
        audio_positions=audio_pos.tolist(),
        bytes_per_token=int(table.nbytes // max(1, len(rows))) if rows else 4 * n_layers,
        tokens=new,
        text=adapter.tokenizer.decode(new, skip_special_tokens=True),
        step_bytes=int(step_bytes[0]),
    )
