"""The bad-input corpus, round four (issue 35): a server whose GET /models names itself, not the
model asked for; readers of sections gone stale behind cafe's back; records files that are not
regular files; bytes cafe writes that it would then refuse. Real run folders (synth, reference
listener, rule judge) and loopback servers, through the same helpers as rounds one to three."""

from __future__ import annotations

import json
from pathlib import Path

from test_bad_input_corpus_round3 import _served_run

from cafe.testing.loopback import OpenAILoopback


def _alias(name: str) -> list[dict]:
    """llama.cpp's GET /v1/models: one row, its GGUF alias, whatever name it is asked for."""
    return [{"id": name, "object": "model", "owned_by": "llamacpp", "created": 1}]


# -- served identity --------------------------------------------------------------------------
def test_a_server_listing_only_its_alias_keys_the_cache_by_it(tmp_path: Path) -> None:
    """`-o model=default` against a llama.cpp-like server that lists its own alias, restarted on
    the same URL with other weights: the second run asks every item anew."""
    with OpenAILoopback(reply=lambda b: "<answer>A</answer>", models=_alias("one.gguf")) as srv:
        code, out, _ = _served_run(tmp_path, srv.url, "a", "-o", "model=default")
        assert code == 0 and srv.count == 2, out
        manifest = json.loads((tmp_path / "a" / "manifest.json").read_text())
        assert manifest["served_model"]["reported"] == [{"id": "one.gguf", "owned_by": "llamacpp"}]
        srv.models, srv.reply = _alias("two.gguf"), (lambda b: "<answer>B</answer>")
        code, out, answers = _served_run(tmp_path, srv.url, "b", "-o", "model=default")
        assert code == 0 and srv.count == 4, out  # nothing replayed from the first weights
        assert answers == {"g1": "<answer>B</answer>", "g2": "<answer>B</answer>"}


def test_a_server_listing_several_other_models_is_keyed_by_the_list(tmp_path: Path) -> None:
    rows = [*_alias("x.gguf"), *_alias("y.gguf")]
    with OpenAILoopback(reply=lambda b: "<answer>A</answer>", models=rows) as srv:
        assert _served_run(tmp_path, srv.url, "a", "-o", "model=default")[0] == 0
        manifest = json.loads((tmp_path / "a" / "manifest.json").read_text())
        listed = manifest["served_model"]["reported"][0]["listed"]
        assert [r["id"] for r in listed] == ["x.gguf", "y.gguf"]


def test_a_server_without_models_says_there_is_no_identity_once(tmp_path: Path) -> None:
    with OpenAILoopback(reply=lambda b: "<answer>A</answer>") as srv:
        code, out, _ = _served_run(tmp_path, srv.url, "a")
        assert code == 0, out
        said = [x for x in out.splitlines() if "no identity to key on" in x]
        assert len(said) == 1 and "-o model=NAME" in said[0] and srv.url in said[0], out
