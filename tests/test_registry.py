"""The one registry: decorator, lazy "module:attr", entry points, did-you-mean; and model
resolution on top of it (card, adapter name, checkpoint folder)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest
from runner_helpers import register, write_dist

from cafe.adapters.resolve import ModelNotFound, resolve_model
from cafe.registry import Registry, UnknownNameError

register()


def test_decorator_aliases_and_duplicates() -> None:
    reg: Registry[type] = Registry("widget")

    @reg.register("round", "circle")
    class Round:
        pass

    assert reg.get("round") is Round and reg.get("circle") is Round
    reg.add("round", Round)  # the same object again is fine
    with pytest.raises(ValueError, match="registered twice"):
        reg.add("round", object)


def test_lazy_entries_import_on_first_get() -> None:
    reg: Registry[object] = Registry("thing")
    reg.add_lazy("dumps", "json:dumps")
    assert "dumps" in reg.names()
    import json

    assert reg.get("dumps") is json.dumps


def test_unknown_name_did_you_mean() -> None:
    reg: Registry[int] = Registry("metric")
    reg.add("accuracy", 1)
    with pytest.raises(UnknownNameError) as e:
        reg.get("acuracy")
    assert str(e.value) == "unknown metric 'acuracy'; did you mean accuracy? (known: accuracy)"


def test_entry_point_group(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = write_dist(tmp_path / "site", name="cafe_ep_probe", with_helpers=False)
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    reg: Registry[type] = Registry("adapter", entry_point_group="cafe.adapters")
    assert "echo-first" in reg.names()
    cls = reg.get("echo-first")
    assert cls.__name__ == "EchoFirst" and cls.__module__ == "cafe_ep_probe"
    sys.modules.pop("cafe_ep_probe", None)


def test_resolve_card_adapter_and_errors(tmp_path: Path) -> None:
    cards = tmp_path / "cards.yaml"
    cards.write_text("tone-card:\n  adapter: tone\n  checkpoint: /ckpt/x\n  prompt_style: lalm\n")
    r = resolve_model("tone-card", cards_files=[str(cards)])
    assert (r.card.name, r.checkpoint, r.label) == ("tone-card", "/ckpt/x", "tone-card")
    r = resolve_model("tone-card", "/other/ckpt", cards_files=[str(cards)])
    assert r.checkpoint == "/other/ckpt" and r.label == "tone-card@ckpt"
    r = resolve_model("tone")  # an adapter without a card: its default card
    assert (r.card.adapter, r.card.prompt_style) == ("tone", "mpar2")
    with pytest.raises(ModelNotFound, match="not a checkpoint folder"):
        resolve_model(str(tmp_path))
    with pytest.raises(ModelNotFound, match="unknown model 'nothing-like-it'"):
        resolve_model("nothing-like-it")


def test_adapters_list_and_show_builtin_cards() -> None:
    from click.testing import CliRunner

    from cafe.adapters.cli import adapters_command

    listed = CliRunner().invoke(adapters_command, ["list"])
    assert listed.exit_code == 0, listed.output
    header, *rows = listed.output.splitlines()
    assert header.split() == [
        "name",
        "adapter",
        "engine",
        "group",
        "prompt",
        "style",
        "decoding",
        "checkpoint",
    ]
    ref = next(r for r in rows if r.startswith("reference "))
    assert ref.split()[:5] == ["reference", "reference", "cpu", "Baseline", "mpar2"]
    shown = CliRunner().invoke(adapters_command, ["show", "reference"])
    assert "prompt_style: mpar2" in shown.output and "prompt_template_hash:" in shown.output
    missing = CliRunner().invoke(adapters_command, ["show", "referense"])
    assert missing.exit_code == 1 and "did you mean reference" in missing.output


def test_lazy_entry_whose_module_registers_itself(tmp_path, monkeypatch):
    """A lazily registered module that also uses the decorator must resolve, not KeyError."""
    from cafe.registry import Registry

    reg = Registry("thing")
    mod = tmp_path / "selfreg_mod.py"
    mod.write_text(
        "import builtins\n"
        "reg = builtins._cafe_test_registry\n"
        "@reg.register('thing-a')\n"
        "class ThingA:\n"
        "    pass\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    import builtins

    monkeypatch.setattr(builtins, "_cafe_test_registry", reg, raising=False)
    reg.add_lazy("thing-a", "selfreg_mod:ThingA")
    obj = reg.get("thing-a")
    assert obj.__name__ == "ThingA"
    assert reg.get("thing-a") is obj
