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
