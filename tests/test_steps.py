"""The table of post-run steps (cafe.steps.cli.TABLE) is what the command line and cafe.api offer:
each command resolves to the click command the table names, each API function to the function
it names, each section is registered, and a step on the engine has a flag and a keyword for each
of its options. The engine's own promises are tested with a step of its own."""

from __future__ import annotations

import importlib
import inspect
import json

import pytest
from click.testing import CliRunner

from cafe import api
from cafe.cli import COMMANDS, main
from cafe.folder.sections import is_builtin, sections
from cafe.records import Prediction, Sample
from cafe.steps import STEPS, Option, Step, StepRecord
from cafe.steps.base import Output, Records, Section
from cafe.steps.cli import TABLE
from cafe.steps.engine import run_step
from cafe.store import RunStore


def _resolve(target: str):
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


@pytest.mark.parametrize("entry", TABLE, ids=lambda e: e.command)
def test_the_table_is_what_cli_and_api_offer(entry):
    assert COMMANDS[entry.command] == entry.click and entry.api in api.FUNCTIONS
    cmd, fn = _resolve(entry.click), getattr(api, entry.api)
    if entry.command in STEPS.builtins:  # one registration line: its step class, no target
        assert entry.api not in api.TARGETS and _resolve(entry.target) is STEPS.get(cmd.name)
        assert cmd.step is STEPS.get(cmd.name)  # the command made from the step
    else:
        assert api.TARGETS[entry.api] == entry.target and fn.function() is _resolve(entry.target)
    assert cmd.name == entry.command and callable(fn)
    if entry.section is not None:
        assert is_builtin(entry.section), entry.section
    if entry.engine:
        step = STEPS.step(entry.command)
        assert step.writes.name == entry.section
        params = {p.name for p in cmd.params}
        accepted = set(inspect.signature(fn).parameters)
        for o in step.options:
            assert (o.cli or o.name) in params, f"cafe {entry.command} lacks {o.flag}"
            assert o.name in accepted, f"cafe.api.{entry.api} lacks {o.name}"


def test_every_builtin_section_has_its_command_in_the_table():
    written = {e.section for e in TABLE if e.section} | {"accuracy"}  # accuracy: `cafe run`
    assert written == {n for n, info in sections().items() if info.builtin}


class Length(Step):
    """A toy step with calls: the length of each output, 'failed' for outputs saying FAIL."""

    name = "length"
    writes = Section("length")
    records = Records("length")
    options = (Option("unit", str, "chars"),)
    calls: list[str] = []

    def call(self, ctx, item):
        out = item[1].raw_output
        self.calls.append(item[0].id)
        if "FAIL" in out:
            raise RuntimeError("the length server fell over")
        return StepRecord(item[1].sample_id, item[1].run_index, "ok", value=len(out))

    def section(self, ctx, records):
        return {"total": sum(r.value for r in records if r.status == "ok")}


def _folder(root, outputs):
    store = RunStore(root).create()
    store.write_samples(Sample(k, "x", "v", "q", ["a"], "a", []) for k in outputs)
    with store.writer("predictions.jsonl") as w:
        w.write_many(Prediction(k, 0, "m", "s", "h", o) for k, o in outputs.items())
    return store


def test_engine_resumes_retries_failed_records_and_caches(tmp_path):
    store = _folder(tmp_path / "r", {"a": "xx", "b": "FAIL", "c": "yyy"})
    Length.calls = []
    res = run_step(Length(), store.root, cache=tmp_path / "c.sqlite")
    assert res.section["total"] == 5 and res.status.status == "partial"
    assert res.section["outcome"]["reason"] == "1 of 3 replies unusable"
    assert sorted(Length.calls) == ["a", "b", "c"]
    # the failed record is asked again, the others kept
    store.path("predictions.jsonl").write_text("")
    with store.writer("predictions.jsonl") as w:
        w.write_many(Prediction(k, 0, "m", "s", "h", o)
                     for k, o in {"a": "xx", "b": "zzzz", "c": "yyy"}.items())  # fmt: skip
    res = run_step(Length(), store.root, cache=tmp_path / "c.sqlite")
    assert sorted(Length.calls) == ["a", "b", "b", "c"]
    assert res.section["total"] == 9 and res.status.status == "complete"
    assert res.section["counters"]["total"]["calls"] == 4
    lines = [json.loads(x) for x in store.path("length.jsonl").read_text().splitlines()]
    assert len(lines) == 3  # compacted: one record per (item, run)


def test_a_plugin_step_cannot_take_a_builtin_section(tmp_path):
    class Shadow(Length):
        name, writes = "shadow", Section("cues")

    store = _folder(tmp_path / "r", {"a": "xx"})
    with pytest.raises(Exception, match="section 'cues' is cafe's own"):
        run_step(Shadow(), store.root, cache=tmp_path / "c.sqlite")


def test_a_registered_step_is_a_command(tmp_path, monkeypatch):
    monkeypatch.setattr(STEPS, "_objects", dict(STEPS._objects))
    STEPS.add("length", Length)
    store = _folder(tmp_path / "r", {"a": "xx"})
    cache = ["--cache", str(tmp_path / "c.sqlite"), "--no-progress"]
    res = CliRunner().invoke(main, ["length", str(store.root), "--unit", "bytes", "--json", *cache])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["spec"] == {"step": "length", "version": 1, "unit": "bytes"}
    assert "length" in CliRunner().invoke(main, ["--help"]).output


class Tally(Step):
    """A toy step whose results live in its section and a file of its own: each output's
    length; an output saying NONE is unusable. It reads back what its file kept last time."""

    name, writes = "tally", Section("tally")
    records = Records("tally", in_section=True, reads=("tally.jsonl",))

    def call(self, ctx, item):
        out = item[1].raw_output
        status = "invalid" if "NONE" in out else "ok"
        return StepRecord(item[1].sample_id, item[1].run_index, status, value=len(out))

    def section(self, ctx, records):
        section = {"sum": sum(r.value for r in records if r.status == "ok"),
                   "kept_before": len(ctx.view.files.get("tally.jsonl", []))}  # fmt: skip
        rows = [{"sample_id": r.sample_id, "value": r.value} for r in records]
        return Output(section, files={"tally.jsonl": rows})


def test_a_step_without_records_file_writes_its_files_with_its_section_only(tmp_path):
    store = _folder(tmp_path / "r", {"a": "NONE", "b": "NONE"})
    cache = tmp_path / "c.sqlite"
    with pytest.raises(Exception, match="produced nothing usable"):
        run_step(Tally(), store.root, cache=cache)
    assert not store.path("tally.jsonl").exists() and not store.path("tally.spec.json").exists()
    assert "tally" not in store.read_metrics()
    store = _folder(tmp_path / "s", {"a": "xx", "b": "NONE"})
    first = run_step(Tally(), store.root, cache=cache).section
    assert (first["sum"], first["kept_before"], first["outcome"]["usable"]) == (2, 0, 1)
    rows = [json.loads(x) for x in store.path("tally.jsonl").read_text().splitlines()]
    assert sorted(r["sample_id"] for r in rows) == ["a", "b"]
    # no records file: the usable record replays from the call cache, the unusable is asked
    again = run_step(Tally(), store.root, cache=cache).section
    assert (again["sum"], again["kept_before"], again["counters"]["total"]["calls"]) == (2, 2, 3)
    assert again["counters"]["this_invocation"]["cache_hits"] == 1


def test_a_damaged_line_in_a_file_a_step_reads_is_one_line_naming_file_and_line(tmp_path):
    from cafe.errors import ConfigError
    from cafe.folder.view import read_view

    store = _folder(tmp_path / "r", {"a": "xx"})
    store.path("rows.jsonl").write_text('{"a": 1}\n{"a": \n{"a": 3}\n')
    with pytest.raises(ConfigError, match=r"rows\.jsonl: line 2: not valid JSON"):
        read_view(store, ("rows.jsonl",))
    store.path("rows.jsonl").write_text('{"a": 1}\n{"a": 3}\n')
    assert read_view(store, ("rows.jsonl",)).files == {"rows.jsonl": [{"a": 1}, {"a": 3}]}


def test_the_cues_section_goes_when_the_cafe_judgements_it_compared_change(tmp_path):
    """cues_vs_required_events reads the CAFE judge's judgements: a re-judge makes it stale."""
    store = _folder(tmp_path / "r", {"a": "xx"})
    line = '{{"sample_id": "a", "run_index": 0, "judge": "{}", "template_hash": "h", '
    line += '"raw_reply": ""}}\n'
    store.path("judgements.jsonl").write_text(line.format("j"))
    store.update_metrics("cues", {"offline": {"recall": 0.4}, "cues_vs_required_events": {}})
    assert store.invalidate() == {}
    store.path("judgements.jsonl").write_text(line.format("k"))  # re-judged by another judge
    assert store.invalidate() == {
        "cues": "computed on other judgements (they changed since: resumed, retried or re-judged)"
    }
    assert "cues" not in store.read_metrics()


def test_a_cache_entry_that_is_no_record_is_asked_again_and_replaced(tmp_path):
    import sqlite3

    outputs, cache = {"a": "xx", "b": "yyy"}, tmp_path / "c.sqlite"
    Length.calls = []
    run_step(Length(), _folder(tmp_path / "r1", outputs).root, cache=cache)
    with sqlite3.connect(cache) as db:  # damaged by hand or an older cafe: no Length record
        assert db.execute("UPDATE calls SET value = ?", ('{"sample_id": 5}',)).rowcount == 2
    res = run_step(Length(), _folder(tmp_path / "r2", outputs).root, cache=cache)
    assert res.section["total"] == 5 and res.status.status == "complete"
    assert sorted(Length.calls) == ["a", "a", "b", "b"]  # asked again, not a failed record
    again = run_step(Length(), _folder(tmp_path / "r3", outputs).root, cache=cache)
    assert again.section["counters"]["this_invocation"]["cache_hits"] == 2  # replaced
    assert len(Length.calls) == 4 and again.section["total"] == 5


WORDS = '''
"""A built-in-style step: its module, and one registration line."""
from cafe.folder.status import by_counts
from cafe.steps import Option, Step
from cafe.steps.base import Section


def counts(ctx):
    return [len(p.raw_output.split()) for p in ctx.view.predictions]


class WordsStep(Step):
    """Words per output of RUN_DIR: the mean count of whitespace-separated words over the
    outputs that have at least --least, written to metrics.json "words".

    \\b
    cafe words runs/x --least 2
    """

    name = "words"
    help = "Mean words per output."
    writes = Section("words", higher_is_better=("mean",))
    options = (Option("least", int, 1, "Count only outputs of at least this many words."),)
    positional = ("least",)

    def status(self, ctx, records):
        n = counts(ctx)
        return by_counts(len(n), sum(k >= ctx.spec["least"] for k in n), "outputs", "too short")

    def section(self, ctx, records):
        kept = [k for k in counts(ctx) if k >= ctx.spec["least"]]
        return {"mean": sum(kept) / len(kept), "outputs": len(kept)}
'''


def test_a_builtin_step_is_its_module_plus_one_registration_line(tmp_path, monkeypatch):
    """One ``STEPS.builtin`` line (as cafe/steps/__init__.py registers cafe's own) gives a step
    its `cafe --help` line (its module not imported), its row of the table (cafe.cli and
    cafe.api make their commands and functions from the rows, test_the_table_is_what_cli_and_
    api_offer), its command (long help: the class's docstring), its cafe.api function and its
    section's facts."""
    import re
    import sys

    from cafe.commands import step_row
    from cafe.folder.sections import section_info

    (tmp_path / "words_step.py").write_text(WORDS, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    for registered in ("_lazy", "_objects", "builtins"):
        monkeypatch.setattr(STEPS, registered, dict(getattr(STEPS, registered)))
    monkeypatch.delitem(sys.modules, "words_step", raising=False)
    STEPS.builtin("words", "words_step:WordsStep", "Mean words per output, by whitespace.", "words")

    listed = CliRunner().invoke(main, ["--help"]).output
    assert re.search(r"^  words +Mean words per output, by whitespace\.$", listed, re.M), listed
    assert "words_step" not in sys.modules  # `cafe --help` read the registration only
    row = step_row(STEPS.builtins["words"])
    assert (row.name, row.click, row.step, row.section, row.engine) == (
        "words", "cafe.steps.cli:words_command", "words", "words", True)  # fmt: skip

    helped = CliRunner().invoke(main, ["words", "--help"]).output
    assert "the mean count of whitespace-separated words" in helped and "--least" in helped
    assert "\n  cafe words runs/x --least 2\n" in helped  # its \b example kept as written
    store = _folder(tmp_path / "r", {"a": "one two three", "b": "four", "c": "five six"})
    res = CliRunner().invoke(main, ["words", str(store.root), "--least", "2", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["mean"] == 2.5  # (3 + 2) / 2: "four" is one word

    fn = api.step("words")  # its cafe.api function (at import: cafe.api.words, by its row)
    assert list(inspect.signature(fn).parameters)[:2] == ["run_dir", "least"]
    assert fn.__doc__.startswith("Mean words per output -> the metrics.json 'words' section")
    assert fn(store.root, 1)["mean"] == 2.0  # 6 words over 3 outputs
    assert json.loads(store.path("metrics.json").read_text())["words"]["outputs"] == 3
    assert section_info("words").direction("mean") == "up"  # from its Section, not a table


def test_cafe_help_imports_no_step_module():
    import subprocess
    import sys

    code = (
        "import sys; from click.testing import CliRunner; from cafe.cli import main; "
        "r = CliRunner().invoke(main, ['--help']); assert r.exit_code == 0, r.output; "
        "print(' '.join(sorted(m for m in sys.modules if m.startswith('cafe.steps.'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["cafe.steps.base"]  # the protocol, no step's module
