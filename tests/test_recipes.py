"""Training recipes: every key is one something reads; a typo is an error naming the key and the
file (never a setting silently ignored)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cafe.training.recipes import load_recipe, recipe_names


@pytest.mark.parametrize("name", recipe_names())
def test_built_in_recipes_load(name: str) -> None:
    recipe = load_recipe(name)
    assert recipe["recipe_file"].endswith(f"{name}.yaml")


@pytest.mark.parametrize(
    ("body", "key"),
    [
        ("base_model: x\nlearnig_rate: 1\n", "'learnig_rate'"),
        ("data:\n  synth_n: 4\n  sft_sise: 3\n", "data.'sft_sise'"),
        ("rewards: {alpha: 1.0, gama: 2.0}\n", "rewards.'gama'"),
        ("judge: {kind: offline, endpoint: http://x}\n", "judge.'endpoint'"),
    ],
)
def test_unknown_recipe_key_names_key_and_file(body: str, key: str, tmp_path: Path) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text(body)
    with pytest.raises(ValueError) as err:
        load_recipe(str(path))
    message = str(err.value)
    assert message.startswith(f"{path}: unknown recipe key {key}")
    assert "\n" not in message


def test_unknown_trainer_key_names_block_key_and_file(tmp_path: Path) -> None:
    from trl import SFTConfig

    from cafe.training.recipes import check_trainer_block

    path = tmp_path / "mine.yaml"
    path.write_text("sft: {num_train_epochs: 1, learnig_rate: 0.1}\n")
    recipe = load_recipe(str(path))
    with pytest.raises(ValueError, match=r"mine.yaml: unknown recipe key sft.'learnig_rate'; did"):
        check_trainer_block(recipe, "sft", SFTConfig)
    check_trainer_block(load_recipe("smoke"), "sft", SFTConfig)  # the built-in one is clean


@pytest.mark.parametrize("name", ["mpar2-7b-grpo", "mpar2-7b-grpo-authors", "mpar2-3b-grpo"])
def test_paper_grpo_recipes_run_grpos_loss(name: str, tmp_path: Path) -> None:
    """TRL 1.16 defaults to loss_type "dapo" (token-level) and beta 0; the paper's recipes carry
    GRPO's own loss and ms-swift's defaults (the authors' trainer): sequence-level "grpo", the
    group's reward std as scale, KL beta 0.04."""
    from trl import GRPOConfig

    from cafe.training.grpo import grpo_config

    default = GRPOConfig(output_dir=str(tmp_path), report_to=[], bf16=False)
    assert (default.loss_type, default.beta, default.scale_rewards) == ("dapo", 0.0, "group")
    cfg = grpo_config(load_recipe(name), tmp_path, bf16=False, use_vllm=False)
    assert (cfg.loss_type, cfg.beta, cfg.scale_rewards) == ("grpo", 0.04, "group")
    assert cfg.num_generations == 8 and cfg.learning_rate == 1e-5


def test_3b_grpo_recipe_starts_from_the_3b_sft_checkpoint() -> None:
    r3, r7 = load_recipe("mpar2-3b-grpo"), load_recipe("mpar2-7b-grpo")
    assert r3["base_model"] == "qwen2.5-omni-3b" and r3["model"] == "runs/mpar2-3b-sft/checkpoint"
    assert r3["grpo"] == r7["grpo"] and r3["rewards"] == r7["rewards"]
