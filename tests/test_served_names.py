"""Issue 46: a served model goes by its served name on every page a run makes (report title,
protocol table, A/B page, folder table, leaderboard row), the adapter staying on its own
line; pages and leaderboards meant to be shared hold no absolute path of the machine; no lock
file stays in the working folder. Two `cafe run`s against a loopback OpenAI server."""

from __future__ import annotations

import html
import re

from click.testing import CliRunner

from cafe.cli import main
from cafe.testing.loopback import OpenAILoopback

REPLY = "Reasoning: a dog barks twice, then a bell rings.\n<answer>A</answer>"


def _cafe(*argv: str) -> str:
    res = CliRunner().invoke(main, list(argv), catch_exceptions=False)
    assert res.exit_code == 0, f"cafe {' '.join(argv)}:\n{res.output}"
    return res.output


def test_served_names_on_every_page_and_no_machine_path(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("CAFE_LEADERBOARD", raising=False)
    runs = {}
    with OpenAILoopback(reply=lambda body: REPLY) as srv:
        for served in ("served-a", "served-b"):
            out = f"runs/{served}"
            _cafe("run", "--model", "openai-compatible", "-o", f"model={served}",
                  "--endpoint", srv.url, "--bench", "synth", "--version", "n6-seed0",
                  "--out", out, "--no-progress")  # fmt: skip
            runs[served] = tmp_path / out
    assert {b["model"] for b in srv.requests} == {"served-a", "served-b"}
    a, b = runs["served-a"], runs["served-b"]
    _cafe("report", str(a), str(b), "--html")
    _cafe("leaderboard", "add", str(a), "--leaderboard", "mine.yaml")
    _cafe("leaderboard", "html", "--leaderboard", "mine.yaml")
    folder = _cafe("report", "runs")

    summary = (a / "report" / "summary.md").read_text(encoding="utf-8")
    assert summary.splitlines()[0].startswith("# Run report: served-a on synth")
    page = html.unescape((a / "report" / "index.html").read_text(encoding="utf-8"))
    assert "served-a (synth) vs served-b (synth)" in page  # the A/B page's title
    assert "openai-compatible (synth)" not in page
    # the protocol table: the model by its served name, the adapter as the adapter
    assert re.search(r"<th>model</th>\s*<td>served-a</td>", page)
    assert re.search(r"<th>adapter</th>\s*<td>openai-compatible</td>", page)
    board = (tmp_path / "mine.yaml").read_text(encoding="utf-8")
    assert "model: served-a" in board
    assert "served-a" in (tmp_path / "leaderboard.html").read_text(encoding="utf-8")
    assert re.search(r"served-a\s.*\ssynth", folder) and re.search(r"served-b\s.*\ssynth", folder)

    # shared pages name the run folder relative to the working folder, never by its full path
    lb_page = (tmp_path / "leaderboard.html").read_text(encoding="utf-8")
    shared = {"summary.md": summary, "index.html": page, "mine.yaml": board, "lb": lb_page}
    for name, text in shared.items():
        assert str(tmp_path) not in text, f"{name} holds the machine's path {tmp_path}"
    assert "runs/served-a" in summary and "run_dir: runs/served-a" in board
    # every command ended: no lock file left behind, in the working folder or a run folder
    assert not [p.name for p in tmp_path.rglob("*.lock")]
