"""The one caller (issue 42) and what it owns: the judges' cache keys (a JudgeSpec's, byte for
byte), one call for identical prompts in flight, no run folder needed, any event loop; a
judge's unusable replies never replayed once they are all it gave (issue 45); a judge whose
first batch of replies is all unusable stops with one line naming the cause (issue 46)."""

from __future__ import annotations

import asyncio
import json
import threading

from click.testing import CliRunner

from cafe.cache import Cache
from cafe.caller import FIRST_BATCH_MIN, Caller, CallerSpec, context_too_small
from cafe.judge.extraction import parse_reply
from cafe.judge.spec import JudgeSpec
from cafe.steps.cli import judge_command
from cafe.testing.loopback import OpenAILoopback
from tests.test_server_breaker import _judge_run as _run  # a run folder of n items

SPEC = JudgeSpec(task="t", kind="openai-compatible", model="m", template_hash="h",
                 endpoint="named", max_tokens=32)  # fmt: skip
GOOD = json.dumps({k: [] for k in ("all_reasoning_events", "matched_events", "error_matched",
                                   "error_use", "neutral_events", "missed_events")})  # fmt: skip


def _text(reply: str | None) -> tuple[str | None, str | None]:
    return (reply, None) if reply and reply.startswith("ok") else (None, f"not ok: {reply!r}")


def test_the_key_is_the_judge_specs_and_identical_prompts_in_flight_share_one_call(tmp_path):
    release = threading.Event()

    def reply(body):
        release.wait(10)  # both asks are in flight before the first reply comes
        return "ok " + body["messages"][0]["content"]

    cache = Cache(tmp_path / "c.sqlite")
    with OpenAILoopback(reply=reply) as srv:
        caller = Caller(CallerSpec("openai-compatible", "m", (srv.url,)), identity=SPEC,
                        cache=cache)  # fmt: skip

        async def both():  # a loop of the test's own (a foreign one, as TRL's), no run folder
            msgs = [{"role": "user", "content": "p"}]
            asks = [asyncio.ensure_future(caller.ask(msgs, {"prompt": "p", "attempt": 0}, _text))
                    for _ in range(2)]  # fmt: skip
            await asyncio.sleep(0)
            release.set()
            out = await asyncio.gather(*asks)
            await caller.aclose()
            return out

        a, b = asyncio.run(both())
    assert a.value == b.value == "ok p" and len(srv.requests) == 1 and caller.calls == 1
    key = SPEC.call_key(prompt="p", attempt=0)  # the key judges have always written
    assert cache.get(key) == {"text": "ok p"}


def _judge(store, url, cache, *more):
    return CliRunner().invoke(judge_command, [
        str(store.root), "--judge", "openai-compatible", "--judge-model", "jm",
        "--judge-endpoint", url, "--cache", str(cache), "--no-progress",
        "--judge-concurrency", "2", *more])  # fmt: skip


def test_a_judge_that_never_answered_leaves_nothing_a_healthy_one_would_replay(tmp_path):
    """Issue 45: a judge answering prose, then the same judge healthy (a fresh folder, the same
    cache): the healthy one is called for every item and its judgements are usable."""
    cache = tmp_path / "judge.sqlite"
    with OpenAILoopback(reply=lambda body: "I'm ready to help!") as srv:
        bad = _judge(_run(tmp_path / "a", 3), srv.url, cache)
    assert bad.exit_code != 0 and len(srv.requests) == 3 * 3  # 3 attempts each, nothing usable
    with OpenAILoopback(reply=lambda body: GOOD) as srv:
        store = _run(tmp_path / "b", 3)
        good = _judge(store, srv.url, cache)
        assert good.exit_code == 0, good.output
        assert len(srv.requests) == 3  # on e023d67: 0, every prose reply replayed
    rows = [json.loads(x) for x in store.path("judgements.jsonl").open()]
    assert [r["status"] for r in rows] == ["ok"] * 3


def test_a_judge_answering_prose_stops_after_its_first_batch(tmp_path):
    store = _run(tmp_path / "r", 40)  # 40 items x 3 attempts = 120 calls without the stop
    with OpenAILoopback(reply=lambda body: "I'm ready to help!") as srv:
        res = _judge(store, srv.url, tmp_path / "c.sqlite", "--limit", "40")
        sent = len(srv.requests)
    assert res.exit_code != 0 and "Traceback" not in res.output
    [line] = [x for x in res.output.splitlines() if "unusable" in x]
    assert f"its first {FIRST_BATCH_MIN} replies are all unusable: format not followed" in line
    assert "I'm ready to help" in line
    # the first batch, plus what was in flight beside it (2 items, each up to 3 attempts)
    assert FIRST_BATCH_MIN <= sent <= FIRST_BATCH_MIN + 2 * 3


class _SmallContext(OpenAILoopback):
    """llama-cpp-python's server with n_ctx 1024: a request asking for more is HTTP 400."""

    def route(self, method, path, headers, raw):  # type: ignore[no-untyped-def]
        if method == "POST" and path.startswith("/v1/chat/completions"):
            body = json.loads(raw)
            with self._lock:
                self.requests.append(body)
            asked = 52 + int(body.get("max_tokens") or 0)  # the prompt's 52, the reply's budget
            message = (f"This model's maximum context length is 1024 tokens. However, you "
                       f"requested {asked} tokens (52 in the messages, {body.get('max_tokens')}"
                       " in the completion). Please reduce the length of the messages or "
                       "completion.")  # fmt: skip
            err = {"error": {"message": message, "type": "invalid_request_error"}}
            return 400, {}, json.dumps(err).encode()
        return super().route(method, path, headers, raw)


def test_a_judge_whose_context_is_too_small_says_so_after_its_first_batch(tmp_path):
    store = _run(tmp_path / "r", 40)
    with _SmallContext() as srv:
        res = _judge(store, srv.url, tmp_path / "c.sqlite")
        sent = len(srv.requests)
    assert res.exit_code != 0 and "Traceback" not in res.output
    [line] = [x for x in res.output.splitlines() if "unusable" in x]
    assert "context too small: the server's context is 1024 tokens" in line
    assert "the request needs 2100" in line  # 52 + the judge's 2048-token budget
    assert sent <= FIRST_BATCH_MIN + 2  # one call per item (no retry fixes a 400)


def test_the_context_cause_reads_the_servers_that_say_it():
    llama_cpp = (
        'http://h/v1: HTTP 400: {"error":{"code":400,"message":"request (3000 tokens) exceeds '
        'the available context size (2048 tokens), try increasing it","type":'
        '"exceed_context_size_error","n_prompt_tokens":3000,"n_ctx":2048}}'
    )
    cause = context_too_small(llama_cpp)
    assert cause is not None and "context is 2048 tokens" in cause and "needs 3000" in cause
    assert context_too_small("http://h/v1: HTTP 500: internal error") is None


def test_the_judges_parser_decides_what_is_usable():
    assert parse_reply(GOOD)[1] is None and parse_reply("I'm ready to help!")[0] is None


def test_judge_limit_judges_the_first_n_and_says_the_section_is_partial(tmp_path):
    store = _run(tmp_path / "r", 12)
    with OpenAILoopback(reply=lambda body: GOOD) as srv:
        res = _judge(store, srv.url, tmp_path / "c.sqlite", "--limit", "5")
        assert res.exit_code == 0, res.output
        assert len(srv.requests) == 5
        cafe = json.loads(store.path("metrics.json").read_text())["cafe"]
        assert cafe["outcome"]["status"] == "partial"
        assert "--limit 5: 5 of 12 (item, run)s" in cafe["outcome"]["reason"]
        # the same from Python, then without a limit: the rest, the first 5 kept
        from cafe import api

        api.judge(store.root, "openai-compatible", "jm", [srv.url], limit=7, progress=False,
                  cache=tmp_path / "c.sqlite")  # fmt: skip
        assert len(srv.requests) == 7
        assert _judge(store, srv.url, tmp_path / "c.sqlite").exit_code == 0
        assert len(srv.requests) == 12
    cafe = json.loads(store.path("metrics.json").read_text())["cafe"]
    assert "outcome" not in cafe and cafe["judgements"]["ok"] == 12  # whole: its usual shape


def test_every_judging_step_takes_limit():
    import click

    from cafe.cli import main

    judging = []
    ctx = click.Context(main)
    for name in main.list_commands(ctx):
        cmd = main.get_command(ctx, name)
        flags = {o for p in cmd.params for o in getattr(p, "opts", [])}
        # `cafe listen` makes model runs beside the run (its controls), then judges them: not a
        # judging step over a folder; `cafe run --limit` limits the run itself
        if "--judge-endpoint" in flags and name != "listen":
            judging.append(name)
            assert "--limit" in flags, name
    assert {"judge", "judge-accuracy", "judge-official", "rubric", "cues"} < set(judging)


def test_a_judging_step_has_one_concurrency_default_and_its_api_function_takes_limit():
    """Issue 42: judge concurrency was 16 in `cafe judge` and 8 in `api.step("judge")`."""
    import inspect

    import click

    from cafe import api
    from cafe.cli import main

    for name in ("judge", "rubric", "judge-accuracy", "judge-official", "cues"):
        cmd = main.get_command(click.Context(main), name)
        flags = {p.name: p.default for p in cmd.params}
        cli = flags.get("judge_concurrency", flags.get("concurrency"))
        params = inspect.signature(api.step(name)).parameters
        assert params["concurrency"].default == cli, name
        assert "limit" in params
    assert inspect.signature(api.step("judge")).parameters["concurrency"].default == 16


def test_a_thinking_callers_budget_is_the_answers_plus_its_thinking():
    client = object()  # built lazily by nobody: the caller is given it
    plain = Caller(CallerSpec("openai", "m"), identity=SPEC, client=client)
    thinks = Caller(CallerSpec("openai", "m", thinking=True, thinking_budget=100),
                    identity=SPEC, client=client)  # fmt: skip
    assert (plain.max_tokens(16), thinks.max_tokens(16)) == (16, 116)


def test_clients_are_built_only_by_clients_adapters_and_the_caller_and_one_run_sync():
    """Issue 42: no judge, step or stage builds its own chat client; ``asyncio.run`` appears
    only inside cafe.execution.run_sync."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "cafe"
    builders, runs = [], []
    for path in root.rglob("*.py"):
        rel = path.relative_to(root.parent).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            if name == "make_client" and not rel.startswith(
                ("cafe/clients/", "cafe/adapters/", "cafe/caller.py")
            ):
                builders.append(rel)
            if (
                name == "run"
                and getattr(f, "value", None) is not None
                and getattr(f.value, "id", "") == "asyncio"
            ):
                runs.append(rel)
    # run_sync's own two (no loop running; a helper thread's loop under a running one)
    assert builders == [] and set(runs) == {"cafe/execution.py"}
