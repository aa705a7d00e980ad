"""The bad-input corpus, round three (issue 30): files outside the folder, a poisoned or
borrowed cache, secrets in names, exports and lists, absurd values. Each kind runs through the
same check as the first two rounds (tests/test_bad_input_corpus.py): one line naming the file,
nothing already on disk lost, the good items processed."""

from __future__ import annotations

import json
import os
import re
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_bad_input_corpus import (
    _BUILT,
    GOOD,
    Case,
    _bench,
    _cmd,
    _run_args,
    _run_folder,
    _yaml_file,
    isolate,
    run_kind,
)

from cafe.cli import main
from cafe.testing.loopback import OpenAILoopback


# -- nothing outside the folder ---------------------------------------------------------------
def _victim(tmp: Path, text: str = "precious\n") -> Path:
    return _yaml_file(tmp, "victim.json", text)


def lock_file_a_link(tmp):
    d = _run_folder(tmp)
    victim = _victim(tmp)
    (d / ".cafe.lock").unlink(missing_ok=True)
    (d / ".cafe.lock").symlink_to(victim)
    return Case(_cmd("run", d), [str(d / ".cafe.lock"), "symbolic link", "remove it"], 1,
                keep=(victim,))  # fmt: skip


def lock_file_a_dangling_link(tmp):
    d = _run_folder(tmp)
    target = tmp / "created-by-cafe.json"
    (d / ".cafe.lock").unlink(missing_ok=True)
    (d / ".cafe.lock").symlink_to(target)

    def check(out: str) -> None:  # a dangling link never creates its target
        assert not target.exists()

    return Case(_cmd("judge", d), [str(d / ".cafe.lock"), "symbolic link"], 1, check=check)


def lock_file_a_fifo(tmp):
    d = _run_folder(tmp)
    (d / ".cafe.lock").unlink(missing_ok=True)
    os.mkfifo(d / ".cafe.lock")
    return Case(_cmd("decay", d), [str(d / ".cafe.lock"), "not a regular file"], 1)


def leaderboard_lock_a_link(tmp):
    d = _run_folder(tmp)
    victim = _victim(tmp)
    board = d.parent / "lb.yaml"
    (d.parent / ".lb.yaml.lock").symlink_to(victim)
    return Case(_cmd("lb-add", d), [str(d.parent / ".lb.yaml.lock"), "symbolic link"], 1,
                keep=(victim,), check=lambda out: _absent(board))  # fmt: skip


def _absent(p: Path) -> None:
    assert not p.exists()


def predictions_a_link_out(tmp):
    d = _run_folder(tmp)
    elsewhere = tmp / "elsewhere"
    elsewhere.mkdir()
    victim = elsewhere / "predictions.jsonl"
    (d / "predictions.jsonl").rename(victim)
    (d / "predictions.jsonl").symlink_to(victim)
    args = [*_cmd("run", d), "--runs", "2"]  # the second run of each item would append
    return Case(args, [str(d / "predictions.jsonl"), "outside the run folder"], 1, keep=(victim,),
                env=_built_cache())  # fmt: skip


def _built_cache() -> dict[str, str]:
    """The cache the shared run folder was built with: its synth clips are where its
    samples.jsonl says, so a resume does not rewrite that file."""
    return {"CAFE_CACHE": str(_BUILT["rf"].parent / "cache")}


def out_is_another_tools_folder(tmp):
    meta = _bench(tmp, GOOD)
    other = tmp / "run"
    other.mkdir()
    mine = (_yaml_file(other, "results.json", '{"acc": 0.9}'),
            _yaml_file(other, "config.yaml", "lr: 0.1\n"))  # fmt: skip

    def check(out: str) -> None:
        assert sorted(p.name for p in other.iterdir()) == ["config.yaml", "results.json"]

    return Case(_run_args(meta, tmp),
                [str(other), "not a cafe run folder", "results.json", "--out"], 1,
                keep=mine, check=check)  # fmt: skip


# -- a cache that cannot be poisoned or borrowed ----------------------------------------------
def _served_run(tmp: Path, url: str, out: str, *extra: str) -> tuple[int, str, dict]:
    """`cafe run` of the two good items against the server at ``url``: (exit, output, answers
    by sample id as the model wrote them)."""
    meta = tmp / "data" / "meta.jsonl"
    if not meta.exists():
        _bench(tmp, GOOD)
    args = [a.replace("{url}", url) for a in _run_args(meta, tmp)]
    args[args.index("--out") + 1] = str(tmp / out)
    r = CliRunner().invoke(main, [*args, *extra])
    preds = tmp / out / "predictions.jsonl"
    rows = [json.loads(x) for x in preds.read_text().splitlines()] if preds.exists() else []
    return r.exit_code, r.output, {p["sample_id"]: p["raw_output"] for p in rows}


def _content(value):
    """A server whose reply's message content is ``value`` (a number, an object…)."""
    return lambda body: {
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": value},
            }
        ]
    }


@pytest.mark.parametrize("content", [42, {"text": "A"}, True, 1.5], ids=repr)
def test_a_malformed_reply_is_never_cached(tmp_path, content):
    """The poisoned reply fails its items as a server fault (retried), never a traceback; the
    same spec against a healthy server then answers every item, in a new folder too."""
    with OpenAILoopback(reply=_content(content)) as bad:
        code, out, _ = _served_run(tmp_path, bad.url, "run")
        assert "Traceback" not in out and code == 1, out
        assert "malformed reply" in out
        code, out, _ = _served_run(tmp_path, bad.url, "nocache", "--no-cache")  # likewise
        assert "Traceback" not in out and code == 1 and "malformed reply" in out, out
    with OpenAILoopback(reply=lambda b: "<answer>A</answer>") as good:
        code, out, answers = _served_run(tmp_path, good.url, "run2")
        assert code == 0 and "Traceback" not in out, out
        assert answers == {"g1": "<answer>A</answer>", "g2": "<answer>A</answer>"}
        assert good.count == 2  # nothing came from the cache
        code, out, answers = _served_run(tmp_path, good.url, "run")  # the failed items retried
        assert code == 0 and set(answers.values()) == {"<answer>A</answer>"}, out


DAMAGE = ["not json", "[1, 2]", '{"text": 5}', '{"text": "A", "output_tokens": "many"}',
          '"a string"', "null", "[" * 100000 + "]" * 100000]  # fmt: skip


def _damage(db: Path, value) -> int:
    con = sqlite3.connect(db)
    n = con.execute("UPDATE calls SET value = ?", (value,)).rowcount
    con.commit()
    con.close()
    return n


@pytest.mark.parametrize("bad", [*DAMAGE, b"\xff\xfe"], ids=lambda v: repr(v)[:24])
def test_a_damaged_model_cache_entry_is_skipped_and_replaced(tmp_path, bad):
    with OpenAILoopback(reply=lambda b: "<answer>A</answer>") as srv:
        assert _served_run(tmp_path, srv.url, "run")[0] == 0
        assert _damage(tmp_path / "cache" / "calls.sqlite", bad) >= 1
        code, out, answers = _served_run(tmp_path, srv.url, "run2")
        assert code == 0 and "Traceback" not in out, out
        assert answers == {"g1": "<answer>A</answer>", "g2": "<answer>A</answer>"}
        assert srv.count == 4  # asked again…
        assert _served_run(tmp_path, srv.url, "run3")[0] == 0
        assert srv.count == 4  # …and the entries replaced: the third run is all cache hits


@pytest.mark.parametrize("bad", DAMAGE[:5], ids=lambda v: repr(v)[:24])
def test_a_damaged_judge_cache_entry_is_skipped_and_replaced(tmp_path, bad):
    from test_judge_pipeline import build_run

    ok = {k: [] for k in ("required_events", "all_caption_events", "all_reasoning_events",
                          "matched_events", "error_matched", "error_use", "neutral_events",
                          "missed_events")}  # fmt: skip
    caps = tmp_path / "caps.jsonl"
    caps.write_text("".join(json.dumps({"sample_id": f"s{i}", "caption": "a dog barks"}) + "\n"
                            for i in range(4)))  # fmt: skip
    with OpenAILoopback(reply=lambda b: json.dumps(ok)) as srv:
        for name in ("j1", "j2"):
            store = build_run(tmp_path / name)
            args = [
                "judge",
                str(store.root),
                "--judge",
                "openai-compatible",
                "--judge-model",
                "j",
                "--judge-endpoint",
                srv.url,
                "--captions",
                str(caps),
                "--no-progress",
            ]
            r = CliRunner().invoke(main, args)
            assert r.exit_code == 0 and "Traceback" not in r.output, r.output
            if name == "j1":
                calls = srv.count
                assert _damage(tmp_path / "cache" / "judge.sqlite", bad) >= 1 and calls > 0
        assert srv.count == 2 * calls  # every damaged entry asked again


def _weights(root: str) -> list[dict]:
    return [{"id": "m", "object": "model", "owned_by": "vllm", "root": root, "created": 1}]


def test_two_servers_with_one_model_name_never_share_entries(tmp_path):
    """Two servers answering to ``-o model=m`` with other weights: the second run is the
    second model's, every item asked."""
    a, b = (lambda _: "<answer>A</answer>"), (lambda _: "<answer>B</answer>")
    with OpenAILoopback(reply=a, models=_weights("/w/one")) as one, \
         OpenAILoopback(reply=b, models=_weights("/w/two")) as two:  # fmt: skip
        assert _served_run(tmp_path, one.url, "a")[0] == 0
        code, out, answers = _served_run(tmp_path, two.url, "b")
        assert answers == {"g1": "<answer>B</answer>", "g2": "<answer>B</answer>"}, out
        assert two.count == 2
        manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
        assert manifest["served_model"]["reported"] == [
            {"id": "m", "owned_by": "vllm", "root": "/w/two"}
        ]


def test_an_endpoint_alone_keeps_entries_apart_unless_replicas_report_their_weights(tmp_path):
    """Servers reporting nothing about their weights differ by endpoint, declared replicas or
    not (a declaration is no identity: issue 45); ``-o replicas=true`` over servers that
    report the same weights makes them copies of one model, sharing entries."""
    with OpenAILoopback(reply=lambda b: "<answer>A</answer>") as one, \
         OpenAILoopback(reply=lambda b: "<answer>B</answer>") as two:  # fmt: skip
        _served_run(tmp_path, one.url, "a")
        assert _served_run(tmp_path, two.url, "b")[2]["g1"] == "<answer>B</answer>"
        _served_run(tmp_path, one.url, "c", "-o", "replicas=true")
        code, out, answers = _served_run(tmp_path, two.url, "d", "-o", "replicas=true")
        # its own entries of run b (same endpoint, same nothing reported), not one's
        assert code == 0 and answers["g1"] == "<answer>B</answer>" and two.count == 2, out
        one.models = two.models = _weights("/w/same")
        _served_run(tmp_path, one.url, "e", "-o", "replicas=true")
        code, out, answers = _served_run(tmp_path, two.url, "f", "-o", "replicas=true")
        assert code == 0 and answers["g1"] == "<answer>A</answer>" and two.count == 2, out


def test_a_restarted_server_with_other_weights_is_named(tmp_path):
    """The same endpoint now reporting other weights: no entry of the old ones is served, and
    resuming the folder says so in one line."""
    with OpenAILoopback(reply=lambda b: "<answer>A</answer>", models=_weights("/w/v1")) as srv:
        assert _served_run(tmp_path, srv.url, "run")[0] == 0
        srv.models = _weights("/w/v2")
        code, out, _ = _served_run(tmp_path, srv.url, "run2")
        assert code == 0 and srv.count == 4, out  # a new folder: every item asked again
        code, out, _ = _served_run(tmp_path, srv.url, "run", "--runs", "2")
        lines = [x for x in out.splitlines() if "/w/v1" in x and "/w/v2" in x]
        assert lines and str(tmp_path / "run") in lines[0], out


def test_the_cache_key_carries_a_schema_version(monkeypatch):
    from cafe import cache

    key = cache.make_key(kind="generate", x=1)
    monkeypatch.setattr(cache, "SCHEMA", cache.SCHEMA + 1)
    assert cache.make_key(kind="generate", x=1) != key


# -- secrets and names ------------------------------------------------------------------------
PASSWORD = "pw-PLANT-0123456789"


def _with_userinfo(url: str) -> str:
    return url.replace("http://", f"http://corpus:{PASSWORD}@")


def _nowhere(tmp: Path, out: str) -> None:
    """The password in no file name, no file and no output line."""
    assert PASSWORD not in out
    for p in tmp.rglob("*"):
        assert PASSWORD not in str(p)
        if p.is_file() and not p.is_symlink():
            assert PASSWORD.encode() not in p.read_bytes(), p


def test_an_echoed_url_credential_is_masked(tmp_path):
    """A server that echoes the Basic credentials it was sent (decoded) in its reply."""
    with OpenAILoopback(reply=lambda b: f"corpus:{PASSWORD} <answer>A</answer>") as srv:
        code, out, answers = _served_run(tmp_path, _with_userinfo(srv.url), "run")
    assert code == 0, out
    assert answers["g1"] == "*** <answer>A</answer>"
    _nowhere(tmp_path, out)
    from cafe.redaction import scrub_text

    assert scrub_text("the corpus folder") == "the corpus folder"  # a user name is no secret


def test_a_judge_identity_names_no_credential(tmp_path):
    """A judge endpoint with user:password@: its judgements file (and every other name) and
    its records carry the host, never the password."""
    case = _judge_case(tmp_path)
    with OpenAILoopback(reply=case.reply) as srv:
        args = [a.replace("{url}", _with_userinfo(srv.url)) for a in case.args]
        r = CliRunner().invoke(main, args)
    assert r.exit_code == 0 and "Traceback" not in r.output, r.output
    assert (tmp_path / "jrun" / "judgements.openai-compatible-j.jsonl").exists()
    _nowhere(tmp_path, r.output)


@pytest.mark.parametrize("kind", ["openai-compatible", "gemini"])
def test_a_client_identity_and_its_file_names_carry_no_credential(kind, monkeypatch):
    """What names judge files and batch folders (``judge_slug`` of the client's identity)."""
    from cafe.clients import make_client
    from cafe.store import judge_slug

    monkeypatch.setenv("CAFE_ENDPOINT_API_KEY", "x" * 20)
    client = make_client(kind, "j", endpoints=[f"http://u:{PASSWORD}@host:1/v1"])
    assert PASSWORD not in client.identity and "host:1" in client.identity
    assert PASSWORD not in judge_slug(f"openai:j@http://u:{PASSWORD}@host/v1")


def _judge_case(tmp):
    from test_bad_input_corpus import _judged_run

    ok = {k: [] for k in ("required_events", "all_caption_events", "all_reasoning_events",
                          "matched_events", "error_matched", "error_use", "neutral_events",
                          "missed_events")}  # fmt: skip
    return _judged_run(tmp, lambda b: json.dumps(ok), [])


def key_missing_names_the_variable(tmp):
    """The key-missing line keeps its advice: the endpoint and the variable to set."""
    d = _run_folder(tmp)
    return Case(["judge", str(d), "--judge", "openai", "--judge-model", "gpt-x", "--no-progress"],
                ["set the OPENAI_API_KEY variable", "https://api.openai.com/v1 takes its key "
                 "from OPENAI_API_KEY"], 1, env={"OPENAI_API_KEY": ""})  # fmt: skip


# -- exports and lists --------------------------------------------------------------------------
EVIL = ['=HYPERLINK("http://x.example","y")', "+1+1", "-2+3", "@SUM(A1)", "\tx", "\rx"]
HTML = "a|b\nc <img src=x onerror=alert(1)> [l](http://x) `c` *e*"


def _runs_with_model(tmp: Path, names: list[str]) -> Path:
    """A folder of run folders whose manifests name these models."""
    runs = tmp / "runs"
    for i, name in enumerate(names):
        d = _run_folder(runs, f"r{i}")
        m = json.loads((d / "manifest.json").read_text())
        m["model"]["name"] = name
        (d / "manifest.json").write_text(json.dumps(m))
    return runs


def report_folder_csv_formulas(tmp):
    runs = _runs_with_model(tmp, EVIL)

    def check(out: str) -> None:
        import csv
        import io

        rows = list(csv.reader(io.StringIO(out)))
        models = [r[1] for r in rows[1 : 1 + len(EVIL)]]
        assert sorted(models) == sorted("'" + e.replace("\r", "\n") for e in EVIL)

    return Case(["report", str(runs), "--format", "csv"], [], check=check)


def report_folder_markdown_cells(tmp):
    runs = _runs_with_model(tmp, [HTML, "plain"])

    def check(out: str) -> None:
        rows = [x for x in out.splitlines() if x.startswith(("| r0 ", "| r1 "))]
        assert len(rows) == 2  # the newline did not split a row
        for row in rows:  # every cell stays a cell: 12 columns, 13 unescaped pipes
            assert len(re.findall(r"(?<!\\)\|", row)) == 13, row
        assert "<img" not in out and "&lt;img" in out and "\\[l\\](http://x)" in out

    return Case(["report", str(runs)], [], check=check)


def report_folder_tex_cells(tmp):
    runs = _runs_with_model(tmp, ["a & b % c\n\n\\input{x} #_{}~^", "plain"])

    def check(out: str) -> None:
        rows = [x for x in out.splitlines() if x.startswith(("r0 ", "r1 "))]
        assert len(rows) == 2  # no blank line ended the tabular's paragraph
        for row in rows:  # every cell stays a cell: 12 columns, 11 unescaped "&"
            assert len(re.findall(r"(?<!\\)&", row)) == 11, row
        assert r"a \& b \% c \textbackslash{}input\{x\} \#\_\{\}" in rows[0], rows[0]
        assert "%" not in rows[0].replace(r"\%", "")  # no comment swallowing the row's end

    return Case(["report", str(runs), "--format", "tex"], [], check=check)


def manifest_count_a_string(tmp):
    runs = tmp / "runs"
    d = _run_folder(runs, "bad")
    _run_folder(runs, "good")
    m = json.loads((d / "manifest.json").read_text())
    m["bench"]["n_samples"], m["limit"] = "7", 2
    (d / "manifest.json").write_text(json.dumps(m))

    def check(out: str) -> None:  # the good run is listed beside the damaged one
        assert [x for x in out.splitlines() if x.startswith("| good ") and "complete" in x]

    return Case(["report", str(runs)], [str(d / "manifest.json"), "field bench.n_samples",
                                        "expected a count"], check=check)  # fmt: skip


def manifest_count_a_string_in_leaderboard_add(tmp):
    d = _run_folder(tmp)
    m = json.loads((d / "manifest.json").read_text())
    m["bench"]["n_samples"], m["limit"] = "7", 2
    (d / "manifest.json").write_text(json.dumps(m))
    return Case(_cmd("lb-add", d), [str(d / "manifest.json"), "field bench.n_samples"], 1)


def test_one_broken_benchmark_plugin_is_one_line(tmp_path, monkeypatch):
    """An installed plugin whose module fails to import: `cafe bench list` names it in one
    line and lists every other benchmark; `cafe adapters list` lists it beside the rest."""
    from cafe.adapters.base import ADAPTERS
    from cafe.benchmarks import BENCHMARKS

    site = tmp_path / "site"
    (site / "cafe_broken").mkdir(parents=True)
    (site / "cafe_broken" / "__init__.py").write_text("raise RuntimeError('half installed')\n")
    info = site / "cafe_broken-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: cafe-broken\nVersion: 0.1\n")
    eps = "[cafe.benchmarks]\nbroken = cafe_broken:Bench\n[cafe.adapters]\nbroken = cafe_broken:M\n"
    (info / "entry_points.txt").write_text(eps)
    monkeypatch.syspath_prepend(str(site))
    for registry in (BENCHMARKS, ADAPTERS):
        monkeypatch.setattr(registry, "_lazy", dict(registry._lazy))
        monkeypatch.setattr(registry, "_entry_points_loaded", False)
    r = CliRunner().invoke(main, ["adapters", "list"])
    assert r.exit_code == 0 and "Traceback" not in r.output, r.output
    assert [x for x in r.output.splitlines() if x.startswith("broken ")], r.output
    assert [x for x in r.output.splitlines() if x.startswith("reference ")], r.output
    r = CliRunner().invoke(main, ["bench", "list"])
    assert r.exit_code == 0 and "Traceback" not in r.output, r.output
    lines = [x for x in r.output.splitlines() if "broken" in x and "half installed" in x]
    assert len(lines) == 1, r.output
    for name in ("mmar", "mmau", "synth"):
        assert any(x.startswith(name + " ") for x in r.output.splitlines()), r.output


# -- absurd values --------------------------------------------------------------------------------
def synth_version_absurd(tmp):
    args = ["run", "--version", "n99999999999-seed0", "--limit", "1", "--out", str(tmp / "run")]
    return Case(args, ["n99999999999-seed0", "1 to 100000"], 2,
                check=lambda out: _absent(tmp / "cache" / "synth"))  # fmt: skip


def runs_absurd(tmp):
    return Case(["run", "--version", "n4-seed0", "--runs", "1000000000", "--out",
                 str(tmp / "run")], ["--runs", "1<=x<=1000"], 2)  # fmt: skip


def seed_absurd(tmp):
    return Case(["run", "--version", "n4-seed0", "--seed", "-1", "--out", str(tmp / "run")],
                ["--seed", "0<=x<=4294967295"], 2)  # fmt: skip


def decay_bins_absurd(tmp):
    d = _run_folder(tmp)
    return Case(["decay", str(d), "--bins", "1000000000"], ["--bins", "1<=x<=10000"], 2)


def option_timeout_negative(tmp):
    meta = _bench(tmp, GOOD)
    return Case([*_run_args(meta, tmp), "-o", "timeout_s=-1"],
                ["option timeout_s", "-1 is out of range", "above 0"], 1,
                check=lambda out: _absent(tmp / "run"))  # fmt: skip


def option_concurrency_absurd(tmp):
    meta = _bench(tmp, GOOD)
    return Case([*_run_args(meta, tmp), "-o", "concurrency=1000000000"],
                ["option concurrency", "out of range", "100000"], 1)  # fmt: skip


def synth_disk_full(tmp):
    """The synthetic set is generated into a full cache: one line naming the file, and no
    temporary folder left in the cache."""
    from test_bad_input_corpus import _tmpfs

    mnt, umount = _tmpfs(tmp, "2m")
    synth = mnt / "cache" / "synth"

    def check(out: str) -> None:
        assert not [p for p in synth.iterdir()] if synth.exists() else True

    args = ["run", "--version", "n60-seed0", "--out", str(tmp / "run"), "--no-progress"]
    return Case(args, [str(synth), "No space left on device", "free some space"], 1,
                env={"CAFE_CACHE": str(mnt / "cache")}, check=check, cleanup=umount)  # fmt: skip


def test_a_killed_synth_generation_leaves_no_temporary_folder(tmp_path):
    """SIGKILL runs no cleanup: the next generation removes the dead one's folder (a live
    one's stays)."""
    import signal
    import subprocess
    import sys
    import time

    from runner_helpers import CLI

    env = {**os.environ, "CAFE_CACHE": str(tmp_path / "cache"),
           "PYTHONPATH": os.pathsep.join(sys.path)}  # fmt: skip
    synth = tmp_path / "cache" / "synth"
    proc = subprocess.Popen([*CLI, "run", "--version", "n5000-seed0", "--out",
                             str(tmp_path / "big"), "--no-progress"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        # until the generation has written clips into its temporary: a bound for a loaded
        # machine (start-up alone can take tens of seconds), and no wait on a child that died
        for _ in range(3000):
            assert proc.poll() is None, "the generation exited before it was killed"
            temps = (
                [p for p in synth.iterdir() if p.name != "n5000-seed0-v2"] if synth.exists() else []
            )
            if temps and len(list((temps[0] / "audio").glob("*.wav"))) > 5:
                break
            time.sleep(0.1)
        else:
            pytest.fail("the generation never started")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert temps[0].exists()  # left behind by the kill
    r = CliRunner().invoke(main, ["run", "--version", "n4-seed0", "--out", str(tmp_path / "s"),
                                  "--no-progress", "--judge", "none"])  # fmt: skip
    assert r.exit_code == 0, r.output
    assert not temps[0].exists()
    assert sorted(p.name for p in synth.iterdir()) == ["n4-seed0-v2"]


# -- the corpus ------------------------------------------------------------------------------
KINDS: list[Callable[[Path], Case]] = [
    lock_file_a_link, lock_file_a_dangling_link, lock_file_a_fifo, leaderboard_lock_a_link,
    predictions_a_link_out, out_is_another_tools_folder,
    key_missing_names_the_variable,
    report_folder_csv_formulas, report_folder_markdown_cells, report_folder_tex_cells,
    manifest_count_a_string,
    manifest_count_a_string_in_leaderboard_add,
    synth_version_absurd, runs_absurd, seed_absurd, decay_bins_absurd, option_timeout_negative,
    option_concurrency_absurd, synth_disk_full,
]  # fmt: skip


@pytest.fixture(autouse=True)
def _isolated(monkeypatch, tmp_path):
    isolate(monkeypatch, tmp_path)
    monkeypatch.setenv("CAFE_LOCK_WAIT", "0")


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.__name__)
def test_hostile_input_is_one_line_and_loses_nothing(kind, tmp_path, monkeypatch):
    run_kind(kind, tmp_path, monkeypatch)


def test_a_run_rows_footnote_is_plain_markdown():
    """A run row's footnote names the model and the run folder (user text): no HTML, link or
    emphasis survives, and a line break does not start a new paragraph."""
    from cafe.reports.leaderboard import Row, load_leaderboard
    from cafe.reports.tables import build_table, render_md

    name = "m <img src=x onerror=alert(1)> [l](http://x) *e*\n\n# h"
    row = Row(name, "Ours", "mmar", "v1", {"acc": 50.0}, {"kind": "run", "run_dir": "/r/_x_"},
              "2026-01-01")  # fmt: skip
    out = render_md(build_table(4, load_leaderboard(), extra=[row]))
    note = next(x for x in out.splitlines() if "(mmar/v1): run" in x)
    assert "<img" not in out and "&lt;img" in note and r"\[l\](http://x)" in note
    assert r"\*e\*" in note and r"/r/\_x\_" in note and "\n# h" not in out
