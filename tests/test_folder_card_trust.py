"""A checkpoint folder's cafe-card.yaml came with the weights, from whoever made them: it may name
its model and prompt, never where calls go or which key they carry, nor a paper group or another
model's name, unless the user says --trust-card. Its fields are type-checked (one line naming the
file and field). Real `cafe run` against a loopback server that records the keys it is sent."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from cafe.adapters.cards import FOLDER_CARD
from cafe.adapters.resolve import resolve_model
from cafe.benchmarks.synth.generator import generate
from cafe.cli import main
from cafe.records import InputError
from cafe.testing.loopback import OpenAILoopback

KEY = "sk-fake-users-own-openai-key"


def _folder(tmp_path: Path, card: str) -> Path:
    folder = tmp_path / "downloaded"
    folder.mkdir()
    (folder / FOLDER_CARD).write_text(card)
    return folder


def test_a_folder_card_sends_no_key_to_a_server_it_names(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    data = tmp_path / "synth"
    generate(data, n=2, seed=0)
    with OpenAILoopback(reply=lambda body: "A") as srv:
        folder = _folder(
            tmp_path,
            "name: tiny-local\nadapter: openai-compatible\n"
            f"options: {{endpoint: '{srv.url}', api_key_env: OPENAI_API_KEY}}\n",
        )
        args = ["run", "--model", str(folder), "--bench", "synth", "--data", str(data),
                "--out", str(tmp_path / "run"), "--no-progress"]  # fmt: skip
        res = CliRunner().invoke(main, args)
        assert res.exit_code != 0, res.output
        assert "options.api_key_env" in res.output and "--trust-card" in res.output, res.output
        assert "Traceback" not in res.output
        assert srv.count == 0 and srv.paths == []  # nothing was sent anywhere
        # the user vouches for it: now it runs, as the card says
        res = CliRunner().invoke(main, [*args, "--trust-card"])
        assert res.exit_code == 0, res.output
        assert srv.count > 0 and hashlib.sha256(KEY.encode()).hexdigest() in srv.credential_hashes


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ("name: gpt-4o\nadapter: random\n", "name"),
        ("name: mine\nadapter: random\ngroup: Commercial\n", "group"),
        (
            "name: mine\nadapter: random\noptions: {base_url: 'http://x.example'}\n",
            "options.base_url",
        ),
        ("name: mine\nadapter: random\nlaunch: 'curl x | sh'\n", "launch"),
        ("name: mine\nadapter: random\noptions: {back: gpt-4o}\n", "options.back"),
        # placement on a cluster the card names, and a reach-out nested one level down
        ("name: mine\nadapter: random\noptions: {ray: {actors: 2}}\n", "options.ray"),
        (
            "name: mine\nadapter: random\noptions: {server: {address: 'head.example:6379'}}\n",
            "options.server.address",
        ),
        (
            "name: mine\nadapter: random\noptions: {parts: [{model: m}, {url: 'http://x.example'}]}\n",
            r"options.parts\[1\].url",
        ),
    ],
)
def test_a_folder_card_claims_only_its_own_name_and_prompt(tmp_path, body, field) -> None:
    folder = _folder(tmp_path, body)
    with pytest.raises(InputError, match=rf"cafe-card\.yaml: field {field}:.*--trust-card"):
        resolve_model(str(folder))
    card = resolve_model(str(folder), cards_files=[str(folder / FOLDER_CARD)]).card
    assert card.adapter == "random"  # named with --cards (what --trust-card does): accepted


def test_a_folder_card_may_name_its_model_prompt_and_trained_group(tmp_path) -> None:
    folder = _folder(
        tmp_path, "name: my-mpar2\nadapter: random\nprompt_style: mpar2\ngroup: Ours\n"
    )
    card = resolve_model(str(folder)).card
    assert (card.name, card.prompt_style, card.group) == ("my-mpar2", "mpar2", "Ours")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ("name: m\nadapter: [random]\n", "adapter"),
        ("name: m\nadapter: random\noptions: [1, 2]\n", "options"),
        ("name: m\nadapter: random\ngeneration: 0.7\n", "generation"),
        ("name: m\nadapter: random\nprompt_style: {a: 1}\n", "prompt_style"),
    ],
)
def test_card_fields_are_type_checked_in_one_line(tmp_path, body, field) -> None:
    folder = _folder(tmp_path, body)
    with pytest.raises(InputError, match=rf"cafe-card\.yaml: .*field {field}: a "):
        resolve_model(str(folder))
    cards = tmp_path / "cards.yaml"
    cards.write_text("m:\n" + "".join(f"  {line}\n" for line in body.splitlines()[1:]))
    with pytest.raises(InputError, match=rf"cards\.yaml: .*field {field}: a "):
        resolve_model("m", cards_files=[str(cards)])


_EVIL = """import os, pathlib
pathlib.Path(os.environ["CAFE_TEST_MARK"]).write_text(os.environ.get("OPENAI_API_KEY", ""))
from transformers import PretrainedConfig
class EvilConfig(PretrainedConfig):
    model_type = "evil"
"""


@pytest.mark.parametrize(
    ("card", "field"),
    [
        ("name: tiny-local\nadapter: hf-remote-code\n", "adapter"),
        (
            "name: tiny-local\nadapter: qwen2-audio\noptions: {trust_remote_code: true}\n",
            "options.trust_remote_code",
        ),
    ],
)
def test_a_folder_card_runs_none_of_the_code_shipped_with_the_weights(
    tmp_path, monkeypatch, card, field
) -> None:
    """The weights' own Python (config.json's auto_map) is imported only once the user says
    --trust-card: a card asking for it by adapter or by option is refused, nothing is run."""
    mark = tmp_path / "ran"
    monkeypatch.setenv("CAFE_TEST_MARK", str(mark))
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    folder = _folder(tmp_path, card)
    auto = {"AutoConfig": "evil.EvilConfig", "AutoProcessor": "evil.EvilConfig",
            "AutoModelForCausalLM": "evil.EvilConfig"}  # fmt: skip
    (folder / "config.json").write_text(json.dumps({"model_type": "evil", "auto_map": auto}))
    (folder / "evil.py").write_text(_EVIL)
    args = ["run", "--model", str(folder), "--bench", "synth", "--limit", "1",
            "--out", str(tmp_path / "run"), "--no-progress"]  # fmt: skip
    res = CliRunner().invoke(main, args)
    assert res.exit_code != 0
    assert f"field {field}:" in res.output and "--trust-card" in res.output, res.output
    assert not mark.exists()  # the folder's Python never ran
    if field == "adapter":  # the user vouches for it: the code is theirs to run
        CliRunner().invoke(main, [*args, "--trust-card"])
        assert mark.read_text() == KEY
