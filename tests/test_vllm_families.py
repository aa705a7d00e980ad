"""The vLLM adapter against a test double of the ENGINE (vllm.LLM is not installed here): the
adapter itself (family prompts, planning, failure isolation, seeds) is the real one, built from
tiny local checkpoints of each family."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from cafe.adapters.base import ModelCard
from cafe.adapters.vllm import VLLMAdapter
from cafe.adapters.vllm_dp import device_slices
from cafe.adapters.vllm_families import FAMILIES
from cafe.audio import write_wav
from cafe.cluster.pool import shard
from cafe.records import Request
from cafe.testing import tiny_models


class EngineDouble:
    """vllm.LLM's surface the adapter uses. Like vLLM, one bad prompt (text holding POISON)
    aborts the whole generate() call; each output carries the seed vLLM would sample it with
    (parent seed + child index under n) so the test can see which seed a run got."""

    def __init__(self, model: str, **engine):
        from transformers import AutoTokenizer

        self.engine = engine
        self.tokenizer = AutoTokenizer.from_pretrained(model)
        self.calls: list[list[str]] = []
        self.llm_engine = SimpleNamespace(
            model_config=SimpleNamespace(max_model_len=engine.get("max_model_len", 4096))
        )

    def get_tokenizer(self):
        return self.tokenizer

    def generate(self, prompts, params, use_tqdm=False, lora_request=None):
        self.calls.append([p["prompt"] for p in prompts])
        if any("POISON" in p["prompt"] for p in prompts):
            raise ValueError(
                "The decoder prompt (length 9000) is longer than the maximum model length"
            )
        out = []
        for p, sp in zip(prompts, params, strict=True):
            ids = self.tokenizer.encode(p["prompt"], add_special_tokens=False)
            outputs = [
                SimpleNamespace(
                    index=j,
                    text=f"seed={None if sp.seed is None else sp.seed + j}",
                    token_ids=[1, 2, 3],
                    finish_reason="length",
                )
                for j in range(sp.n)
            ]
            out.append(SimpleNamespace(prompt_token_ids=ids, outputs=list(reversed(outputs))))
        return out


class DoubledVLLM(VLLMAdapter):
    engine_factory = staticmethod(EngineDouble)
    sampling_factory = staticmethod(lambda **kw: SimpleNamespace(**kw))


def _clip(tmp_path, name="c.wav", seconds=0.5):
    p = tmp_path / name
    write_wav(p, (0.3 * np.sin(np.arange(int(16000 * seconds)) / 3)).astype(np.float32))
    return str(p)


def _req(sid, clips, run=0, seed=0, text=None, generation=None, system=True):
    parts = [{"type": "audio", "path": c} for c in clips]
    parts.append({"type": "text", "text": text or f"Q {sid}"})
    messages = [{"role": "system", "content": "You are a helpful assistant."}] if system else []
    messages.append({"role": "user", "content": parts})
    return Request(
        sample_id=sid,
        run_index=run,
        messages=messages,
        audio=list(clips),
        generation=generation or {"max_new_tokens": 8, "temperature": 0.0},
        seed=seed,
        prompt_style="lalm",
        template_hash="t",
    )


BUILDERS = {
    "qwen2-audio": (tiny_models.build_tiny_qwen2_audio, "<|AUDIO|>"),
    "qwen2.5-omni": (tiny_models.build_tiny_qwen2_5_omni, "<|AUDIO|>"),
    "audio-flamingo-3": (tiny_models.build_tiny_audio_flamingo3, "<sound>"),
    "phi-4-multimodal-hf": (tiny_models.build_tiny_phi4mm, "<|audio|>"),
}


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    root = tmp_path_factory.mktemp("ckpts")
    return {name: build(root / name) for name, (build, _) in BUILDERS.items()}


@pytest.mark.parametrize("family", sorted(BUILDERS))
def test_one_audio_placeholder_per_clip(checkpoints, tmp_path, family):
    ad = DoubledVLLM(ModelCard("t", "vllm", checkpoint=str(checkpoints[family])))
    assert ad.family.name == family  # picked from the checkpoint's model_type
    tok = ad.tokenizer
    audio_id = tok.convert_tokens_to_ids(BUILDERS[family][1])
    for n in (1, 2):
        clips = [_clip(tmp_path, f"c{i}.wav") for i in range(n)]
        prompt = ad.render(_req("a", clips))
        ids = tok.encode(prompt["prompt"], add_special_tokens=False)
        assert ids.count(audio_id) == n
        audio = prompt["multi_modal_data"]["audio"]
        assert (len(audio) if n > 1 else 1) == n
    assert ad.engine_kwargs()["limit_mm_per_prompt"] == {"image": 0, "video": 0, "audio": 1}


def test_prompts_as_vllms_example_writes_them(checkpoints, tmp_path):
    clip = _clip(tmp_path)
    qwen = DoubledVLLM(ModelCard("t", "vllm", checkpoint=str(checkpoints["qwen2-audio"])))
    assert qwen.render(_req("a", [clip], system=False))["prompt"] == (
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
        "Audio 1: <|audio_bos|><|AUDIO|><|audio_eos|>\nQ a<|im_end|>\n<|im_start|>assistant\n"
    )
    omni = DoubledVLLM(ModelCard("t", "vllm", checkpoint=str(checkpoints["qwen2.5-omni"])))
    assert omni.render(_req("a", [clip], system=False))["prompt"] == (
        "<|im_start|>system\nYou are Qwen, a virtual human developed by the Qwen Team, Alibaba "
        "Group, capable of perceiving auditory and visual inputs, as well as generating text and "
        "speech.<|im_end|>\n<|im_start|>user\n<|audio_bos|><|AUDIO|><|audio_eos|>\nQ a<|im_end|>"
        "\n<|im_start|>assistant\n"
    )
    # a system message of the prompt style replaces the family's default
    assert omni.render(_req("a", [clip]))["prompt"].startswith(
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
    )
    conv = [{"role": "user", "content": [{"type": "audio"}, {"type": "audio"},
                                          {"type": "text", "text": "Q"}]}]  # fmt: skip
    assert FAMILIES.get("phi-4-multimodal").render(conv, None) == (
        "<|user|><|audio_1|><|audio_2|>Q<|end|><|assistant|>"
    )
    assert (
        FAMILIES.get("granite-speech")
        .render(conv, None)
        .endswith(
            "<|start_of_role|>user<|end_of_role|><|audio|><|audio|>Q<|end_of_text|>\n"
            "<|start_of_role|>assistant<|end_of_role|>"
        )
    )


def test_rendering_error_fails_that_item_alone(checkpoints, tmp_path):
    # a checkpoint template that cannot render one item (as Phi-4's string concatenation
    # cannot render content parts): that item fails with its name, the others run
    template = tmp_path / "t.jinja"
    template.write_text(
        "{% for m in messages %}{% for p in m['content'] %}"
        "{% if p['text'] is defined and 'BAD' in p['text'] %}"
        "{{ raise_exception('cannot render this content') }}{% endif %}"
        "{% endfor %}{% endfor %}<|im_start|>user\n<|audio_bos|><|AUDIO|><|audio_eos|>Q"
        "<|im_end|>\n<|im_start|>assistant\n"
    )
    ckpt = str(checkpoints["qwen2-audio"])
    ad = DoubledVLLM(ModelCard("t", "vllm", checkpoint=ckpt), chat_template=str(template))
    assert ad.family.name == "chat-template"
    clip = _clip(tmp_path)
    out = ad.generate([_req("a", [clip]), _req("bad", [clip], text="BAD"), _req("b", [clip])])
    assert [c.sample_id for c in out] == ["a", "bad", "b"]
    assert out[0].error is None and out[2].error is None
    assert "sample bad" in out[1].error and "field prompt" in out[1].error
    assert "cannot render this content" in out[1].error
    assert len(ad.llm.calls) == 1 and len(ad.llm.calls[0]) == 2


def test_a_prompt_that_fails_fails_alone(checkpoints, tmp_path):
    ad = DoubledVLLM(
        ModelCard("t", "vllm", checkpoint=str(checkpoints["qwen2-audio"])), max_model_len=200
    )
    clip = _clip(tmp_path)
    long_text = "Select one option from the provided choices: " * 40
    reqs = [
        _req("a", [clip]),
        _req("poison", [clip], text="POISON"),
        _req("long", [clip], text=long_text),
        _req("b", [clip]),
    ]
    out = ad.generate(reqs)
    assert [c.sample_id for c in out] == ["a", "poison", "long", "b"]
    assert [c.error is None for c in out] == [True, False, False, True]
    assert "longer than the maximum model length" in out[1].error
    assert "over max_model_len 200" in out[2].error
    # the long prompt never reached the engine; the batch of 3 failed, then one by one
    calls = ad.llm.calls
    assert [len(c) for c in calls] == [3, 1, 1, 1]
    assert not any(long_text in p for c in calls for p in c)


def test_n_mode_seeds_are_the_engines_even_for_resumed_gaps(checkpoints, tmp_path):
    ad = DoubledVLLM(
        ModelCard("t", "vllm", checkpoint=str(checkpoints["qwen2-audio"])), runs_as="n"
    )
    clip = _clip(tmp_path)
    g = {"max_new_tokens": 8, "temperature": 0.7}
    # runs 0, 2, 3 still to do (run 1 done before a resume); run k has seed 10 + k
    reqs = [_req("a", [clip], run=r, seed=10 + r, generation=g) for r in (3, 0, 2)]
    assert sorted((tuple(i), s, n) for i, s, n in ad.plan(reqs)) == [((1,), 10, 1), ((2, 0), 12, 2)]
    out = ad.generate(reqs)
    for c, r in zip(out, reqs, strict=True):
        assert c.error is None
        assert c.backend["seed"] == r.seed  # what the runner records as the run's seed
        assert c.text == f"seed={r.seed}"  # the seed the engine sampled this output with


def test_greedy_runs_share_one_generation_and_say_so(checkpoints, tmp_path):
    ad = DoubledVLLM(ModelCard("t", "vllm", checkpoint=str(checkpoints["qwen2-audio"])))
    clip = _clip(tmp_path)
    g = {"max_new_tokens": 8, "temperature": 0.0, "do_sample": True}  # sampling at T=0 is greedy
    reqs = [_req("a", [clip], run=r, seed=r, generation=g) for r in range(3)]
    out = ad.generate(reqs)
    assert len(ad.llm.calls) == 1 and len(ad.llm.calls[0]) == 1
    assert all(c.backend["greedy_shared"] == [0, 1, 2] for c in out)
    assert all(c.backend["seed"] is None for c in out)
    assert ad.sampling_kwargs(g, 5)["temperature"] == 0.0
    assert ModelCard("g", "vllm", generation=g).greedy
    assert not ModelCard("s", "vllm", generation={"temperature": 0.7}).greedy


def test_unsupported_checkpoints_are_refused_with_the_reason(checkpoints, tmp_path):
    thinker = tiny_models.build_tiny_qwen2_5_omni_thinker(tmp_path / "thinker")

    class Never(DoubledVLLM):
        def engine_factory(**kw):  # noqa: N805
            raise AssertionError("the engine must not be built")

    with pytest.raises(ValueError, match="thinker-only Qwen2.5-Omni checkpoint"):
        Never(ModelCard("t", "vllm", checkpoint=str(thinker)))
    with pytest.raises(ValueError, match="transcription model"):
        Never(
            ModelCard("k", "vllm", checkpoint=str(checkpoints["qwen2-audio"])), family="kimi-audio"
        )


def test_shipped_cards_name_a_known_family_and_kimi_is_marked():
    from cafe.adapters.cards import load_cards

    cards = load_cards([])
    vllm_cards = [c for c in cards.values() if c.adapter == "vllm"]
    assert len(vllm_cards) >= 8
    for c in vllm_cards:
        assert FAMILIES.get(c.options["family"]).name == c.options["family"]
    assert "transcription" in cards["kimi-audio-vllm"].unsupported
    with pytest.raises(ValueError, match="not supported"):
        VLLMAdapter(cards["kimi-audio-vllm"])


def test_data_parallel_shards_keep_a_samples_runs_together():
    reqs = [_req(s, [], run=r) for s in ("a", "b", "c") for r in (0, 1)]
    parts = shard(reqs, 2)
    assert parts == [[0, 1, 4, 5], [2, 3]]
    assert device_slices(2, 2, ["0", "1", "2", "3"]) == [["0", "1"], ["2", "3"]]
    with pytest.raises(ValueError, match="needs 4 GPUs; 3 visible"):
        device_slices(2, 2, ["0", "1", "2"])


def test_adapters_list_says_which_cards_are_greedy_or_unsupported():
    from click.testing import CliRunner

    from cafe.adapters.cli import list_command

    out = CliRunner().invoke(list_command, []).output.splitlines()
    row = {line.split()[0]: line.split() for line in out[1:]}
    assert "decoding" in out[0].split()
    assert row["kimi-audio-vllm"][5] == "unsupported"
    assert row["qwen2-audio-7b-instruct-vllm"][5] == "greedy"  # temperature 0.0
    assert row["random"][5] == "sampled"  # do_sample: true
