"""`cafe necessity RUN` takes the model-call options `cafe run` takes (issue 45): a run of a
served model is told its endpoint again (the folder keeps no URL), a run of a model from the
user's --cards is told the cards; the controls then call that model, through the real wire
protocol of a loopback server."""

from __future__ import annotations

import json

from click.testing import CliRunner

from cafe.cli import main
from cafe.testing.loopback import OpenAILoopback

N = 4
RUN = ["--bench", "synth", "--limit", str(N), "--judge", "none", "--no-progress"]


def _section(run) -> dict:  # noqa: ANN001
    return json.loads((run / "metrics.json").read_text())["necessity"]


def test_necessity_of_a_served_model_is_told_its_endpoint(tmp_path, monkeypatch):
    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    with OpenAILoopback(reply=lambda body: "<answer>A</answer>") as srv:
        run = tmp_path / "served"
        model = ["--model", "openai-compatible", "-o", "model=m"]
        res = CliRunner().invoke(main, ["run", *model, "--endpoint", srv.url, *RUN,
                                        "--out", str(run)])  # fmt: skip
        assert res.exit_code == 0, res.output
        assert srv.count == N
        res = CliRunner().invoke(main, ["necessity", str(run), "--endpoint", srv.url,
                                        "--no-progress"])  # fmt: skip
        assert res.exit_code == 0, res.output
        assert srv.count == 4 * N  # caption-only, text-only and silence: one call per item each
        sec = _section(run)
        assert sec["items"] == N and sum(sec["counts"].values()) == N
        res = CliRunner().invoke(main, ["necessity", str(run), "--model", "gpt-4o"])
        assert res.exit_code == 2 and "leave --model out" in res.output


def test_necessity_of_a_model_from_the_users_cards(tmp_path, monkeypatch):
    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    with OpenAILoopback(reply=lambda body: "<answer>B</answer>") as srv:
        cards = tmp_path / "cards.yaml"
        cards.write_text(f"mine:\n  adapter: openai-compatible\n  options: {{model: m, "
                         f"endpoint: '{srv.url}'}}\n")  # fmt: skip
        run = tmp_path / "mine"
        res = CliRunner().invoke(main, ["run", "--model", "mine", "--cards", str(cards), *RUN,
                                        "--out", str(run)])  # fmt: skip
        assert res.exit_code == 0, res.output
        res = CliRunner().invoke(main, ["necessity", str(run), "--cards", str(cards),
                                        "--no-progress"])  # fmt: skip
        assert res.exit_code == 0, res.output
        assert srv.count == 4 * N and _section(run)["items"] == N
