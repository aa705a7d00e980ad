"""AudioGRPOTrainer: TRL 1.16's GRPOTrainer with each row's audio clip threaded through its
rollouts and log-prob passes (how and why: cafe.training.grpo's module docstring). Its own module
because it imports torch and TRL at the top: cafe.training.grpo imports it lazily
(in run_grpo), so importing the recipes and rewards never needs the train extra."""

from __future__ import annotations

import functools
from typing import Any

import torch
from trl import GRPOTrainer
from trl.trainer.utils import entropy_from_logits, selective_log_softmax

from cafe.audio import load_audio
from cafe.training.rollouts import (
    AUDIO_FEATURE_KEYS,
    ScriptedRollouts,
    audio_token_id,
    rename_weights_for_vllm,
    vllm_engine_overrides,
)


class AudioGRPOTrainer(GRPOTrainer):
    """GRPOTrainer whose rollouts and log-prob passes see each row's audio clip."""

    _audio_rows: list[Any] | None = None  # waveforms of the batch being generated
    _vllm_prompt_ids: list[list[int]] | None = None  # the same prompts, placeholder unexpanded
    _audio_forward: dict[str, Any] | None = None  # features aligned with the rows in use
    _rows: list[dict[str, Any]] | None = None  # the generation batch's dataset rows

    def __init__(
        self,
        model,
        *args,
        vllm_engine_args: dict | None = None,
        scripted_rollouts: ScriptedRollouts | None = None,
        **kwargs,
    ):
        # TRL suppresses `config.image_token_id` when sampling from a processor-backed model
        # (a sampled placeholder would mismatch the features). Audio models name their
        # placeholder differently: where the config has no image token, alias the audio
        # token for TRL's setup (never saved); the audio token is added to the suppressed
        # ids below either way (the Qwen2.5-Omni thinker has both tokens).
        config = model.config
        added = False
        audio_id = audio_token_id(config)
        if getattr(config, "image_token_id", None) is None:
            config.image_token_id = audio_id
            added = True
        # TRL builds the reference model from the checkpoint path with the architecture its
        # config.json names; for a full Qwen2.5-Omni folder that is the whole omni model
        # (talker, vocoder), while the policy is its thinker: build the policy's class.
        # TRL's colocated vLLM gets the family's modality limits (no vision tower) and any
        # `vllm_engine_args` (e.g. load_format "dummy": the first weight sync fills it).
        import trl.generation.vllm_generation as trl_vllm
        import trl.trainer.grpo_trainer as trl_grpo

        create = trl_grpo.create_model_from_path
        trl_grpo.create_model_from_path = functools.partial(create, architecture=type(model))
        engine = getattr(trl_vllm, "LLM", None)
        if engine is not None:
            overrides = {**vllm_engine_overrides(model), **(vllm_engine_args or {})}
            trl_vllm.LLM = functools.partial(engine, **overrides)
        try:
            super().__init__(model, *args, **kwargs)
        finally:
            trl_grpo.create_model_from_path = create
            if engine is not None:
                trl_vllm.LLM = engine
            if added:
                del config.image_token_id
        if audio_id is not None and not self.use_vllm:  # transformers rollouts
            ids = list(self.generation_config.suppress_tokens or [])
            if audio_id not in ids:
                self.generation_config.suppress_tokens = [*ids, audio_id]
                self.generation_kwargs["suppress_tokens"] = [*ids, audio_id]
        if self.use_vllm:
            rename_weights_for_vllm(self.vllm_generation, model.config.model_type)
        if scripted_rollouts is not None and self.use_vllm:
            # vLLM's sampling logprobs feed the importance-sampling correction; a scripted
            # completion has none
            raise ValueError("scripted_rollouts needs transformers rollouts (use_vllm: false)")
        self._scripted = scripted_rollouts

    # --- generation batch -------------------------------------------------------------
    def _generate_and_score_completions(self, inputs):
        self._audio_rows = [self._load_row_audio(x) for x in inputs]
        self._rows = list(inputs)
        try:
            output = super()._generate_and_score_completions(inputs)
            if self._audio_forward:
                output.update(self._audio_forward)  # shuffled/split with the rows by TRL
        finally:
            self._audio_rows = None
            self._audio_forward = None
            self._rows = None
        return output

    @staticmethod
    def _load_row_audio(row: dict[str, Any]):
        path = row.get("audio")
        if not path:
            return None
        return load_audio(path, sample_id=str(row.get("id")) if row.get("id") else None)

    def _tokenize_prompts(self, prompts: list):
        rows = self._audio_rows
        if not rows or all(a is None for a in rows):
            return super()._tokenize_prompts(prompts)
        proc = self.processing_class
        texts = [
            proc.apply_chat_template(
                p,
                chat_template=self.chat_template,
                add_generation_prompt=True,
                tokenize=False,
                **self.chat_template_kwargs,
            )
            for p in prompts
        ]
        enc = proc(
            text=texts,
            audio=list(rows),
            sampling_rate=16_000,
            return_tensors="pt",
            padding=True,
        )
        prompt_ids = [
            ids[mask.bool()].tolist()
            for ids, mask in zip(enc["input_ids"], enc["attention_mask"], strict=True)
        ]
        # vLLM expands the placeholder itself: it gets the same text tokenised without the
        # processor's expansion (one audio token per clip); training keeps the expanded ids
        self._vllm_prompt_ids = proc.tokenizer(texts)["input_ids"]
        feats = {k: enc[k] for k in AUDIO_FEATURE_KEYS if k in enc}
        self._audio_forward = {k: v.to(self.accelerator.device) for k, v in feats.items()}
        # tensors in multimodal_fields are passed to generate() by TRL's regular path
        return prompt_ids, None, dict(self._audio_forward)

    def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations, **kw):
        completion_ids, logprobs = self._sampled_single_turn(
            prompt_ids, images, multimodal_fields, num_generations, **kw
        )
        if self._scripted is not None and self._rows is not None:
            completion_ids = self._scripted.apply(
                completion_ids,
                self._rows,
                num_generations,
                self._tokenizer,
                self.eos_token_ids[0],
            )
        return completion_ids, logprobs

    def _sampled_single_turn(self, prompt_ids, images, multimodal_fields, num_generations, **kw):
        rows = self._audio_rows
        if not (self.use_vllm and rows and any(a is not None for a in rows)):
            return super()._generate_single_turn(
                prompt_ids, images, multimodal_fields, num_generations, **kw
            )
        gen = self.vllm_generation
        if gen.mode != "colocate" or gen.tensor_parallel_size > 1:
            # TRL's server protocol and TP gathering carry images only
            raise ValueError(
                "audio GRPO with vLLM needs vllm_mode: colocate and tensor parallel size 1 "
                "(or use_vllm: false for transformers generation)"
            )
        # TRL builds the vLLM requests (sampling settings, weight sync, sleep mode, logprob
        # extraction); each request row gets its clip as multi_modal_data on the way in
        llm = gen.llm
        generate = llm.generate

        unexpanded = self._vllm_prompt_ids

        def generate_with_audio(requests, *args, **kwargs):
            for row, wave, ids in zip(requests, rows, unexpanded, strict=True):
                if wave is not None:
                    row["prompt_token_ids"] = list(ids)
                    row["multi_modal_data"] = {"audio": (wave, 16_000)}
            return generate(requests, *args, **kwargs)

        llm.generate = generate_with_audio
        try:
            return super()._generate_single_turn(
                prompt_ids, None, multimodal_fields, num_generations, **kw
            )
        finally:
            llm.generate = generate

    # --- log-prob passes (old policy, reference, policy) ----------------------------
    def _compute_loss(self, model, inputs):
        self._audio_forward = {k: inputs[k] for k in AUDIO_FEATURE_KEYS if k in inputs}
        try:
            return super()._compute_loss(model, inputs)
        finally:
            self._audio_forward = None

    def _get_per_token_logps_and_entropies(
        self,
        model,
        input_ids,
        attention_mask,
        logits_to_keep,
        batch_size=None,
        compute_entropy=False,
        compute_aux_loss=False,
        **multimodal,
    ):
        audio = self._audio_forward
        if not audio:
            return super()._get_per_token_logps_and_entropies(
                model,
                input_ids,
                attention_mask,
                logits_to_keep,
                batch_size=batch_size,
                compute_entropy=compute_entropy,
                compute_aux_loss=compute_aux_loss,
                **multimodal,
            )
        # a plain forward with the audio features (TRL's fused head calls the text backbone
        # directly, which would bypass the audio encoder and its merge into the sequence)
        batch_size = batch_size or input_ids.size(0)
        all_logps, all_entropies = [], []
        for start in range(0, input_ids.size(0), batch_size):
            end = min(start + batch_size, input_ids.size(0))
            ids = input_ids[start:end]
            feats = {k: v[start:end] for k, v in audio.items()}
            with self.accelerator.autocast():
                logits = model(
                    input_ids=ids,
                    attention_mask=attention_mask[start:end],
                    use_cache=False,
                    **feats,
                ).logits
            logits = logits[:, -logits_to_keep - 1 : -1, :].float() / self.temperature
            all_logps.append(selective_log_softmax(logits, ids[:, -logits_to_keep:]))
            if compute_entropy:
                with torch.no_grad():
                    all_entropies.append(entropy_from_logits(logits))
        logps = torch.cat(all_logps, dim=0)
        entropies = torch.cat(all_entropies, dim=0) if compute_entropy else None
        return logps, entropies, None
