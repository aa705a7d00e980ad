"""One of each (issue 34): one name per function (no module-level ``__getattr__`` forwarders in
the judge layer or cafe.metrics), one executor module the engine imports (not the judge
layer's), one sections module whose facts are declared once and say what the code computes, and
one read model of a run folder that steps, metrics and the folder table read through."""

from __future__ import annotations

import ast
import importlib.util
import inspect
import json
import re
from pathlib import Path

import pytest

import cafe
from cafe.commands import TABLE as COMMAND_TABLE
from cafe.folder.sections import record_inputs, section_info
from cafe.steps import STEPS
from cafe.steps.cli import TABLE

CAFE = Path(cafe.__file__).parent


def _module_getattr(path: Path) -> bool:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return any(isinstance(n, ast.FunctionDef) and n.name == "__getattr__" for n in tree.body)


@pytest.mark.parametrize(
    "path", [*sorted((CAFE / "judge").glob("*.py")), CAFE / "metrics" / "__init__.py"],
    ids=lambda p: f"{p.parent.name}/{p.name}",
)  # fmt: skip
def test_the_judge_layer_and_metrics_have_no_second_names(path):
    assert not _module_getattr(path), f"{path} forwards names with a module-level __getattr__"


def test_the_dead_and_the_duplicate_modules_are_gone():
    for gone in ("cafe.judge.rubric_run", "cafe.metrics.sections", "cafe.judge.stages"):
        assert importlib.util.find_spec(gone) is None, gone
    import cafe.judge.cues as cues
    import cafe.judge.pipeline as pipeline

    assert not hasattr(pipeline, "resume_judgements") and not hasattr(pipeline, "judge_run")
    assert not hasattr(cues, "cue_judgements_file")


def test_central_tables_name_real_homes():
    """Each target is defined in the module the table names (no re-export, no shim)."""
    from cafe import api

    targets = [e.target for e in TABLE] + list(api.TARGETS.values())
    for target in targets:
        module, _, attr = target.partition(":")
        fn = getattr(importlib.import_module(module), attr)
        assert getattr(fn, "__module__", module) == module, f"{target} lives in {fn.__module__}"


def test_the_engine_imports_its_executor_outside_the_judge_layer():
    tree = ast.parse((CAFE / "steps" / "engine.py").read_text(encoding="utf-8"))
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert "cafe.execution" in imported
    assert not {m for m in imported if m and m.startswith("cafe.judge")}, imported


def test_section_facts_are_declared_once_and_say_what_the_code_computes():
    # the CAFE section is computed from judgements (which derive from the predictions)
    assert section_info("cafe").derives_from == ("judgements",)
    assert record_inputs("cafe") == {"judgements", "predictions"}
    # judged_accuracy's figure is its total cell's "acc", read as the accuracy section's is
    assert section_info("judged_accuracy").direction("acc") == "up"
    assert section_info("judged_accuracy").direction("total") is None
    for entry in TABLE:
        if entry.engine:
            cls = type(STEPS.step(entry.command))
            for fact in ("derives_from", "higher_is_better", "lower_is_better"):
                assert fact not in vars(cls), f"{cls.__name__} declares {fact} a second time"


def test_the_folder_table_reads_through_the_store_and_names_a_damaged_file(tmp_path):
    from cafe.reports.folder import folder_table
    from cafe.store import RunStore

    good = RunStore(tmp_path / "runs" / "good").create()
    good.write_manifest({"model": {"name": "m1"}, "bench": {"name": "synth"}})
    good.update_metrics("accuracy", {"total": {"correct": 1, "total": 2, "acc": 50.0}})
    bad = RunStore(tmp_path / "runs" / "bad").create()
    bad.write_manifest({"model": {"name": "m2"}})
    bad.path("metrics.json").write_text(json.dumps([1, 2]), encoding="utf-8")
    table = folder_table(tmp_path / "runs")
    good_row = next(line for line in table.splitlines() if line.startswith("| good "))
    bad_row = next(line for line in table.splitlines() if line.startswith("| bad "))
    assert "| m1 | synth |" in good_row and "| 50.00 |" in good_row
    assert "damaged" in bad_row and "metrics.json" in bad_row


PROTOCOL = '''
"""A judging protocol, as a built-in one is written: one module; its registration is one line."""
from cafe.clients import make_client
from cafe.steps import Option, Step, StepRecord
from cafe.steps.base import Records, Section

PROMPT = "Does this answer name a sound? Reply YES or NO.\\n\\n{output}"


class NamesASound(Step):
    name = "names-a-sound"
    help = "Share of outputs that name a sound, as an OpenAI-compatible judge reads them."
    writes = Section("names_a_sound", higher_is_better=("rate",))
    records = Records("names_a_sound")
    options = (Option("judge_model", str, "gpt-4o-mini", "The judge model (OPENAI_BASE_URL)."),)

    async def call(self, ctx, item):
        client = make_client("openai-compatible", ctx.spec["judge_model"])
        prompt = PROMPT.format(output=item[1].raw_output)
        try:
            reply = await client.achat([{"role": "user", "content": prompt}])
        finally:
            await client.aclose()
        word = (reply.final or "").strip().upper()
        p = item[1]
        status = "ok" if word in ("YES", "NO") else "invalid"
        return StepRecord(p.sample_id, p.run_index, status, value=word == "YES")

    def section(self, ctx, records):
        ok = [r for r in records if r.status == "ok"]
        return {"rate": round(100 * sum(r.value for r in ok) / len(ok), 2), "judged": len(ok)}
'''


def test_a_new_judging_protocol_is_one_module_plus_its_registration(tmp_path, monkeypatch):
    """A module and one registration line (as cafe/steps/__init__.py registers its own): its
    command, --help and cafe.api function are made from its declaration; the engine resumes
    and replays it from the call cache; its section facts are registered from the step."""

    from click.testing import CliRunner

    from cafe import api
    from cafe.cli import main
    from cafe.testing.loopback import OpenAILoopback

    (tmp_path / "names_a_sound_protocol.py").write_text(PROTOCOL, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(STEPS, "_lazy", dict(STEPS._lazy))
    monkeypatch.setattr(STEPS, "_objects", dict(STEPS._objects))
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    STEPS.add_lazy("names-a-sound", "names_a_sound_protocol:NamesASound")  # its registration
    run = api.run("reference", "synth", version="n4-seed0", out=tmp_path / "r", progress=False,
                  judge="none").run_dir  # fmt: skip
    outputs = [json.loads(x)["raw_output"] for x in (run / "predictions.jsonl").open()]
    named = set(outputs[:3])  # the judge says the first three name a sound, the last not

    def reply(body):
        return "YES" if body["messages"][0]["content"].split("\n\n", 1)[1] in named else "NO"

    helped = CliRunner().invoke(main, ["names-a-sound", "--help"])
    assert helped.exit_code == 0 and "--judge-model" in helped.output
    assert "Share of outputs that name a sound" in helped.output
    fn = api.step("names-a-sound")
    assert list(inspect.signature(fn).parameters)[:2] == ["run_dir", "judge_model"]
    cache = tmp_path / "c.sqlite"
    with OpenAILoopback(reply=reply) as srv:
        monkeypatch.setenv("OPENAI_BASE_URL", srv.url)
        res = CliRunner().invoke(main, ["names-a-sound", str(run), "--judge-model", "m",
                                        "--cache", str(cache)])  # fmt: skip
        assert res.exit_code == 0, res.output
        sec = json.loads((run / "metrics.json").read_text())["names_a_sound"]
        assert sec["rate"] == 75.0 and sec["judged"] == 4  # 3 of 4, by hand
        assert len(srv.requests) == 4
        # the generated API function: everything kept, nothing asked
        again = fn(run, judge_model="m", cache=cache)
        assert again["rate"] == 75.0 and len(srv.requests) == 4
        # the records lost (kill-like): the engine replays them from the call cache
        (run / "names_a_sound.jsonl").unlink()
        replayed = fn(run, judge_model="m", cache=cache)
        assert replayed["rate"] == 75.0 and len(srv.requests) == 4
        now = {"calls": 0, "cache_hits": 4, "done": 4, "records": {"ok": 4}}
        assert replayed["counters"]["this_invocation"] == now
    assert section_info("names_a_sound").direction("rate") == "up"
    assert record_inputs("names_a_sound") == {"predictions"}


def _param_row(p) -> tuple:  # noqa: ANN001 - a click parameter
    import click

    default = p.default if isinstance(p.default, (str, int, float, bool, list, tuple)) else None
    kind = tuple(p.type.choices) if isinstance(p.type, click.Choice) else p.type.name
    return (p.name, tuple(sorted(p.opts + p.secondary_opts)), type(p).__name__, p.multiple,
            getattr(p, "is_flag", False), p.required, kind,
            tuple(default) if isinstance(default, list) else default,
            getattr(p, "help", None))  # fmt: skip


@pytest.mark.parametrize("name", sorted(c.name for c in COMMAND_TABLE if c.step))
def test_every_step_command_keeps_its_flags_and_their_help(name):
    """Each built-in step command (hand-written or generated from its row) has exactly the
    parameters the hand-written one had: flags, kinds, repeatability, choices, defaults, help."""
    from step_command_flags import ADDED, FLAGS

    from cafe.cli import main

    cmd = main.get_command(None, name)  # type: ignore[arg-type]
    added = ADDED.get(name, ())
    assert [_param_row(p) for p in cmd.params if p.name not in added] == [
        tuple(r) for r in FLAGS[name]
    ]
    assert {p.name for p in cmd.params} - {r[0] for r in FLAGS[name]} == set(added)


#: the built-in step commands made by cafe.steps.cli.step_command from their step's declaration
GENERATED = {"cues", "decay", "judge", "judge-accuracy", "judge-official", "rubric"}


def test_the_step_commands_are_generated_from_their_steps():
    """A command in GENERATED going back to a hand-written click function fails here; one newly
    generated is added to it."""
    from cafe.cli import main

    made = {c.name for c in COMMAND_TABLE if c.step
            and getattr(main.get_command(None, c.name), "step", None)}  # type: ignore[arg-type]  # fmt: skip
    assert made == GENERATED | {"listen"}  # listen's API function keeps its name (run_controls)


def test_no_step_api_function_or_command_is_written_by_hand():
    """Issue 42: a built-in step's cafe.api function and command are generated from its
    registration (cafe/steps/__init__.py) and declaration: no ``def x_run`` forwarder, no
    ``x_command = ...`` line; an old ``x_run`` name left is a ``step_function(Step)`` alias."""
    for path in sorted((CAFE / "steps").glob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            where = f"{path.name}:{node.lineno}"
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                assert not node.name.endswith("_run"), f"{where}: {node.name} forwards by hand"
            names = [t.id for t in getattr(node, "targets", ()) if isinstance(t, ast.Name)]
            for name in names:
                assert not name.endswith("_command"), f"{where}: {name} written by hand"
                if name.endswith("_run"):
                    call = node.value
                    assert isinstance(call, ast.Call) and call.func.id == "step_function", where
    generated = {c.name for c in COMMAND_TABLE if c.engine and not c.api}
    assert generated == set(STEPS.builtins) == GENERATED


def test_every_step_and_judge_call_is_cached_through_the_one_cached_call():
    """cafe.execution.cached_call is the one place a step's or a judge's call meets the cache
    (keys from the caller's frozen spec plus the call's inputs): no module of cafe/steps or
    cafe/judge reads or writes a cache itself."""
    import re

    direct = re.compile(r"\bcache\.(get|put)\(")
    offenders = [p.relative_to(CAFE).as_posix()
                 for p in [*(CAFE / "steps").glob("*.py"), *(CAFE / "judge").glob("*.py")]
                 if direct.search(p.read_text(encoding="utf-8"))]  # fmt: skip
    assert offenders == []


def test_the_cached_call_keys_a_judge_and_a_step_as_cafe_always_has(tmp_path):
    """The keys cached_call derives are the ones existing caches hold: a judge's (its spec's
    call fields plus the request's parts) and a step's (its spec and the call's inputs); a hit
    is not asked again, a failed reply is not stored."""
    import asyncio

    from cafe.cache import Cache, make_key, text_entry
    from cafe.execution import cached_call, call_key
    from cafe.judge.spec import JudgeSpec

    judge = JudgeSpec("answer-extraction", "openai", "m", "abc")
    assert call_key(judge, {"prompt": "p"}) == make_key(judge=judge.call_fields(), prompt="p")
    step = {"step": "s", "version": 1}
    assert call_key(step, {"q": 1}) == make_key(step=step, inputs={"q": 1})

    class Reply:
        def __init__(self, text, error=None):
            self.text, self.final, self.error = text, text, error

    cache, asked = Cache(tmp_path / "c.sqlite"), []

    def reply_entry(reply):  # a judge's entry: its text, none for a failed call
        return None if reply.error or reply.text is None else {"text": reply.text}

    async def ask(reply):
        asked.append(reply)
        return reply

    def once(reply):
        return asyncio.run(cached_call(cache, judge, {"prompt": "p"}, lambda: ask(reply),
                                       entry=reply_entry, valid=text_entry))  # fmt: skip

    assert once(Reply(None, "500")) == (None, asked[-1])  # failed: not stored
    got, fresh = once(Reply("B"))
    assert got == {"text": "B"} and fresh is asked[-1]
    assert once(Reply("never asked")) == ({"text": "B"}, None) and len(asked) == 2
    assert cache.get(make_key(judge=judge.call_fields(), prompt="p")) == {"text": "B"}


def test_the_reward_judge_keys_its_scores_as_it_always_has(tmp_path):
    """The GRPO reward judge's scores go through the one cached call under the keys it has
    always written: a score cached under the old key shape is read back, nothing is sent."""
    import asyncio

    from cafe.cache import Cache, make_key
    from cafe.training import reward_judge as rj

    class Unreachable:  # a score that missed the cache would be asked here
        identity = "openai-compatible:judge"

        async def achat(self, *a, **kw):
            raise AssertionError("a cached score was asked again")

    cache = Cache(tmp_path / "c.sqlite")
    judge = rj.LLMRewardJudge(Unreachable(), cache=cache)
    fields = {"question": "q", "step": "s"}
    prompt = judge.templates["step"].format_map(rj._Blank(fields))
    cache.put(make_key(judge=judge.identity, template=judge.hashes["step"], kind="step",
                       prompt=prompt, thinking=judge.thinking, max_tokens=judge.max_tokens,
                       parse=judge.parse), 0.7)  # fmt: skip
    assert asyncio.run(judge.score("step", fields)) == 0.7 and judge.calls == 0


def test_no_step_turns_off_the_engines_cache_and_only_the_engine_opens_it():
    """The engine owns every step's call cache (cafe.execution.CallCache, opened in
    cafe.steps.engine): no switch to turn it off, no step module opening a cache file."""
    import re

    switch = [p for p in CAFE.rglob("*.py") if "engine_cache" in p.read_text(encoding="utf-8")]
    assert switch == []
    opens = re.compile(r"\bopen_cache\(|\bcache_file\(|\bCache\((?!None\))")
    steps = [p.name for p in (CAFE / "steps").glob("*.py")
             if opens.search(p.read_text(encoding="utf-8"))]  # fmt: skip
    assert steps == []


def _step_classes() -> list[type]:
    from cafe.steps.base import Step

    for path in [*(CAFE / "steps").glob("*.py"), CAFE / "robustness" / "steps.py"]:
        importlib.import_module(module_name(path))
    found, todo = [], [Step]
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo += cls.__subclasses__()
    return [c for c in found if c.__module__.startswith("cafe.")]


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(CAFE.parent).with_suffix("").parts)


def test_the_engine_owns_every_steps_resume_and_no_step_replaces_it():
    """The engine runs the one resume (cafe.execution.resume) with the step's declarations
    (spec_name, redone, legacy_ok, normalize_spec): no step has a resume of its own, nor the
    hooks that threaded one invocation's state (before_calls, after_calls, made)."""
    from cafe.steps.base import Step

    for hook in ("resume", "before_calls", "after_calls", "made"):
        assert not hasattr(Step, hook), hook
    classes = _step_classes()
    assert {"CafeJudgeStep", "CuesStep", "RubricStep", "ChoicesStep"} <= {
        c.__name__ for c in classes
    }
    for cls in classes:
        assert "resume" not in vars(cls), cls.__name__
    callers = [p.name for p in (CAFE / "steps").glob("*.py")
               if re.search(r"\bresume\(", p.read_text(encoding="utf-8"))]  # fmt: skip
    assert callers == ["engine.py"]


def test_the_cafe_judge_keeps_no_state_of_one_invocation(tmp_path):
    """What an invocation made comes from the engine (``Context.made``), not from
    attributes one hook leaves for the next."""
    from cafe.steps.cafe_judge import CafeJudgeStep
    from cafe.steps.engine import run_step
    from cafe.testing.loopback import OpenAILoopback
    from tests.test_judge_llm import build_run, scripted

    store = build_run(tmp_path / "run")
    with OpenAILoopback(reply=scripted()) as srv:
        step = CafeJudgeStep()
        res = run_step(step, store.root, cache=tmp_path / "c.sqlite", endpoints=[srv.url],
                       concurrency=4, judge="openai-compatible", judge_model="judge-m",
                       selective=True)  # fmt: skip
    assert res.section["calls"]["judged_now"] == 5 == len(res.records)
    assert vars(step) == {}  # nothing left on the step by one hook for the next


class _Records:
    """A step whose record is cached whole (``caches = "record"``, the default): one
    loopback judge call per (item, run)."""

    def __new__(cls):  # built here: cafe.steps imports nothing at collection time
        from cafe.clients import make_client
        from cafe.steps import Step, StepRecord
        from cafe.steps.base import Records, Section

        class YesNo(Step):
            name, writes, records = "yes-no", Section("yes_no"), Records("yes_no")

            async def call(self, ctx, item):
                client = make_client("openai-compatible", "j")
                try:
                    reply = await client.achat([{"role": "user", "content": item[1].raw_output}])
                finally:
                    await client.aclose()
                p = item[1]
                return StepRecord(p.sample_id, p.run_index, "ok", value=reply.final)

            def section(self, ctx, records):
                return {"values": sorted(str(r.value) for r in records)}

        return YesNo()


def _each_kind():
    """(kind, build a folder, its replies, run it with (root, url, cache) -> its section)."""
    from cafe.steps.cafe_judge import judge_run
    from cafe.steps.cues import cues_run
    from cafe.steps.engine import run_step
    from cafe.steps.judged import judge_accuracy_run
    from cafe.steps.rubric import rubric_run
    from tests import test_cues, test_judge_llm, test_judged_accuracy, test_rubric

    def cue_reply(body):
        if "[a]" in body["messages"][0]["content"]:
            return test_cues.lists(["bell rings", "dog barks"], [], ["bell rings", "dog barks"])
        return test_cues.lists([], ["thunder"], ["thunder"])

    def answer(body):
        prompt = body["messages"][0]["content"]
        return next(r for k, (_, r, _) in test_judged_accuracy.CASES.items() if f"[{k}]" in prompt)

    def record(root, url, cache):
        return run_step(_Records(), root, cache=cache).section

    return [
        ("record", test_rubric.build_run, lambda: lambda b: "YES", record),
        ("judge", test_judge_llm.build_run, test_judge_llm.scripted,
         lambda r, u, c: judge_run(r, "openai-compatible", "judge-m", [u], 4, progress=False,
                                   cache=c)),
        ("rubric", test_rubric.build_run, test_rubric.scripted,
         lambda r, u, c: rubric_run(r, "openai-compatible", "judge-m", [u], 4, cache=c,
                                    progress=False)),
        ("cues", test_cues.build_run, lambda: cue_reply,
         lambda r, u, c: cues_run(r, "openai-compatible", "jm", [u], 2, progress=False,
                                  cache=c)),
        ("judge-accuracy", test_judged_accuracy._run, lambda: answer,
         lambda r, u, c: judge_accuracy_run(r, "openai-compatible", "gpt-5", [u], cache=c)),
    ]  # fmt: skip


@pytest.mark.parametrize("kind", ["record", "judge", "rubric", "cues", "judge-accuracy"])
def test_a_step_of_each_kind_asks_its_judge_once_through_the_engines_cache(
    kind, tmp_path, monkeypatch
):
    """The same step on a fresh copy of the folder (nothing to resume) with the same cache
    sends the loopback judge nothing: every call is a hit of the engine's call cache, counted
    in the section's counters; the figures are the same. Another cache asks again."""
    from cafe.testing.loopback import OpenAILoopback

    _, build, replies, run = next(k for k in _each_kind() if k[0] == kind)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    cache = tmp_path / "c.sqlite"
    first_dir, second_dir = build(tmp_path / "one").root, build(tmp_path / "two").root
    with OpenAILoopback(reply=replies()) as srv:
        monkeypatch.setenv("OPENAI_BASE_URL", srv.url)
        first = run(first_dir, srv.url, cache)
        sent = len(srv.requests)
        assert sent > 0
        second = run(second_dir, srv.url, cache)
        assert len(srv.requests) == sent  # asked only the first time
        run(build(tmp_path / "three").root, srv.url, tmp_path / "other.sqlite")
        assert len(srv.requests) > sent  # the cache given is the one the calls used
    for counted in (second["counters"]["this_invocation"], second["counters"]["total"]):
        assert counted["calls"] == 0 and counted["cache_hits"] > 0, second["counters"]
    volatile = ("counters", "calls", "spec", "judge", "input", "inputs", "stamp")
    assert {k: v for k, v in first.items() if k not in volatile} == {
        k: v for k, v in second.items() if k not in volatile
    }


def test_the_answer_judge_keeps_no_state_of_one_invocation(tmp_path):
    """judge-accuracy --selective: the rule's decided verdicts come from ``select`` through
    the engine (``this_invocation.selection``), the samples with the items; no attribute is
    left for a later hook. The counters count the judge's calls only, as before."""
    from cafe.records import Prediction
    from cafe.steps.engine import run_step
    from cafe.steps.judged import JudgedAccuracyStep
    from cafe.testing.loopback import OpenAILoopback
    from tests.test_judge_batch import _answer_reply
    from tests.test_judged_accuracy import CASES, _run

    store = _run(tmp_path / "run")
    with store.writer("predictions.jsonl") as w:  # one the official rule decides: (A)
        w.write_many([Prediction("s1", 1, "Tiny", "lalm", "h", "(A)", answer="dog barking",
                                 parse_status="ok", answer_text="(A)")])  # fmt: skip
    replies = {k: reply for k, (_, reply, _) in CASES.items()}
    with OpenAILoopback(reply=_answer_reply(replies)) as srv:
        step = JudgedAccuracyStep()
        res = run_step(step, store.root, cache=tmp_path / "c.sqlite", judge="openai-compatible",
                       judge_model="j", selective=True, endpoints=[srv.url],
                       concurrency=4)  # fmt: skip
    assert {"decided", "todo", "by_id"} & set(vars(step)) == set()
    sec = res.section
    assert sec["selective"]["decided_without_call"] == 1 and sec["selective"]["judged"] == 5
    assert sec["calls"]["judged_now"] == 5  # the five asked; s1 run 1 decided by the rule
    assert sec["counters"]["this_invocation"]["judged"] == 5
    assert sum(sec["counters"]["this_invocation"]["replies"].values()) == 5
    assert sum(sec["verdicts"].values()) == 6  # every prediction has its verdict


def test_another_answer_judge_and_its_section_are_a_subclass_declaring_them(tmp_path):
    """judge-accuracy's old ``make_judge`` / ``build_section`` keywords are declarations: a
    subclass names its judge (built with AnswerJudge's arguments) and the section it builds
    (judged_section's arguments); the engine does the rest, counters included."""
    from cafe.judge.answer import AnswerJudge, Verdict
    from cafe.steps.base import Section
    from cafe.steps.engine import run_step
    from cafe.steps.judged import JudgedAccuracyStep
    from cafe.testing.loopback import OpenAILoopback
    from tests.test_judged_accuracy import CHOICES, _run

    class FirstOption(AnswerJudge):  # names option A for every output, sending nothing
        async def verdict(self, sample, pred):
            return Verdict(pred.sample_id, pred.run_index, sample.choices[0], "ok", "A")

    def chosen(samples, preds, verdicts, judge, breakdowns, runs, rule):
        return {"judge": judge.identity, "chose": sorted(v.choice for v in verdicts)}

    class FirstOptionStep(JudgedAccuracyStep):
        name, writes = "first-option", Section("first_option")
        judge_class = FirstOption
        builds = staticmethod(chosen)

    store = _run(tmp_path / "run")
    with OpenAILoopback(reply=lambda body: "B") as srv:
        sec = run_step(
            FirstOptionStep(),
            store.root,
            cache=tmp_path / "c.sqlite",
            judge="openai-compatible",
            judge_model="j",
            endpoints=[srv.url],
        ).section
    assert srv.requests == []  # its own judge answered
    assert sec["judge"] == "openai-compatible:j" and sec["chose"] == [CHOICES[0]] * 5
    assert sec["counters"]["this_invocation"]["judged"] == 5
    assert sec["counters"]["this_invocation"]["calls"] == 0
    assert (
        json.loads(store.path("metrics.json").read_text())["first_option"]["chose"] == sec["chose"]
    )
