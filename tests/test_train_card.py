"""The card a trained checkpoint carries (cafe-card.yaml, written by `cafe train sft/grpo`):
`cafe run --model FOLDER` resolves the folder to it, so the checkpoint runs under its own name,
group and prompt style, not its base model's. tests/test_smoke.py checks the same on the folders
a real `cafe train smoke` writes; here the folders are made by hand (no training)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from cafe.adapters.cards import FOLDER_CARD
from cafe.adapters.resolve import resolve_model
from cafe.records import InputError
from cafe.training.card import write_card

RECIPE = {"name": "smoke", "base_model": "qwen2-audio", "sft": {"max_steps": 3}}


def _checkpoint(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"model_type": "qwen2_audio"}))
    return folder


def test_sft_then_grpo_checkpoints_run_as_themselves(tmp_path: Path) -> None:
    data = tmp_path / "sft.jsonl"
    data.write_text('{"id": "a"}\n')
    base = _checkpoint(tmp_path / "base")
    sft = _checkpoint(tmp_path / "sft")
    grpo = _checkpoint(tmp_path / "grpo")
    write_card(sft, RECIPE, base, data, "sft")
    write_card(grpo, RECIPE, sft, data, "grpo")
    # no card: its config.json names the base model's card
    assert resolve_model(str(base)).card.name == "qwen2-audio-7b-instruct"
    resolved = resolve_model(str(grpo))
    card = resolved.card
    assert (card.name, card.group, card.prompt_style) == ("smoke-grpo", "MPAR²", "mpar2")
    assert card.adapter == "qwen2-audio" and card.checkpoint == str(grpo)
    assert resolved.label == "smoke-grpo@grpo" and resolved.checkpoint == str(grpo)
    t = card.trained
    assert (t["stage"], t["base_model"], t["base_card"]) == ("grpo", str(sft), "smoke-sft")
    assert t["data_sha256"] == hashlib.sha256(data.read_bytes()).hexdigest()
    recipe_json = json.dumps(RECIPE, sort_keys=True, ensure_ascii=False)
    assert t["recipe"] == "smoke"
    assert t["recipe_sha256"] == hashlib.sha256(recipe_json.encode()).hexdigest()
    sft_card = resolve_model(str(sft)).card
    assert sft_card.name == "smoke-sft" and sft_card.trained["base_model"] == str(base)
    assert "base_card" not in sft_card.trained


def test_a_recipe_names_its_card_and_a_stage_is_not_repeated(tmp_path: Path) -> None:
    data = tmp_path / "rl.jsonl"
    data.write_text("{}\n")
    a = _checkpoint(tmp_path / "a")
    write_card(a, {"name": "mpar2-7b-grpo"}, tmp_path / "base", data, "grpo")
    assert resolve_model(str(a)).card.name == "mpar2-7b-grpo"
    b = _checkpoint(tmp_path / "b")
    write_card(b, {"name": "x", "card_name": "My-MPAR²", "card_group": "Ours"}, a, data, "grpo")
    card = resolve_model(str(b)).card
    assert (card.name, card.group, card.trained["base_card"]) == (
        "My-MPAR²",
        "Ours",
        "mpar2-7b-grpo",
    )


def test_a_damaged_card_is_one_line_naming_the_file(tmp_path: Path) -> None:
    folder = _checkpoint(tmp_path / "ckpt")
    (folder / FOLDER_CARD).write_text("name: x\nadapter: qwen2-audio\ncolour: blue\n")
    with pytest.raises(InputError, match=r"cafe-card\.yaml.*unknown field\(s\) \['colour'\]"):
        resolve_model(str(folder))
    (folder / FOLDER_CARD).write_text("adapter: qwen2-audio\n")
    with pytest.raises(InputError, match="needs a name and an adapter"):
        resolve_model(str(folder))
