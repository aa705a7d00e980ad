"""One central scrubbing (cafe.redaction) under everything that writes: secrets planted in nested
options, endpoint URLs (user:pass@, ?key=), card options and key variables (the known ones and a
custom api_key_env) appear in no written file, no printed line and no log record after `cafe run`
(model + inline judge), `cafe judge` against a dead and a key-refusing server, `cafe caption`,
`cafe adapters show`, `cafe report` and `cafe leaderboard add`."""

from __future__ import annotations

import json
import logging

from click.testing import CliRunner

from cafe.cli import main
from cafe.redaction import scrub, scrub_text
from cafe.testing.loopback import OpenAILoopback

SECRETS = {
    "env_openai": "sk-fake-PLANT01-openai",
    "env_gemini": "AIza-fake-PLANT02-gemini",
    "env_endpoint": "ep-fake-PLANT03-endpoint",
    "env_custom": "custom-fake-PLANT04-value",
    "url_user": "PLANT05user",
    "url_pass": "PLANT06pass",
    "query_key": "PLANT07querykey",
    "nested_option": "PLANT08-nested-option",
    "card_option": "PLANT09-card-token",
    "judge_query": "PLANT10judgequery",
}


def test_scrub_nested_options_urls_queries_and_key_values(monkeypatch):
    monkeypatch.setenv("SOME_SERVICE_TOKEN", "tok-PLANT-abcdef")
    monkeypatch.setenv("MY_VAR", "myvar-PLANT-123456")
    opts = {
        "endpoint": "https://u:p4ss@h.example/v1?key=QK1234&x=1",
        "extra_body": {"api_key": "NESTED1", "config": {"access_token": "NESTED2", "n": 3}},
        "headers": [{"Authorization": "Bearer abcdef123456"}],
        "api_key_env": "MY_VAR",  # a variable name is kept; its value is a secret
        "max_new_tokens": 64,  # not a credential, kept
        "note": "got myvar-PLANT-123456 and tok-PLANT-abcdef back; Bearer zzzzzz999",
    }
    out = scrub(opts)
    assert out["endpoint"] == "https://***@h.example/v1?key=***&x=1"
    assert out["extra_body"] == {"config": {"n": 3}}
    assert out["headers"] == [{}]
    assert out["api_key_env"] == "MY_VAR" and out["max_new_tokens"] == 64
    assert out["note"] == "got *** and *** back; Bearer ***"
    assert opts["extra_body"]["api_key"] == "NESTED1"  # a copy: the caller's dict is untouched
    assert scrub_text("see https://a.b/x?api_key=Z9Z9Z9&token=T1T1T1") == (
        "see https://a.b/x?api_key=***&token=***"
    )


def _leaks(texts: list[str]) -> list[tuple[str, str]]:
    return [(name, t[:200]) for t in texts for name, v in SECRETS.items() if v in t]


def test_planted_secrets_reach_no_file_line_or_log(tmp_path, monkeypatch, caplog):
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("OPENAI_API_KEY", SECRETS["env_openai"])
    monkeypatch.setenv("GEMINI_API_KEY", SECRETS["env_gemini"])
    monkeypatch.setenv("CAFE_ENDPOINT_API_KEY", SECRETS["env_endpoint"])
    monkeypatch.setenv("MY_SERVER_SECRET_VAR", SECRETS["env_custom"])
    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    cards = tmp_path / "cards.yaml"
    cards.write_text(
        "leaky:\n  adapter: openai-compatible\n  engine: openai-compatible\n"
        "  checkpoint: served\n  group: Test\n  prompt_style: lalm\n"
        f"  options: {{extra_body: {{auth_token: {SECRETS['card_option']}}}, concurrency: 4}}\n"
    )
    run_dir = tmp_path / "run"
    out: list[str] = []
    creds = f"{SECRETS['url_user']}:{SECRETS['url_pass']}@"

    def echo_env(body):  # a hostile server echoing what it was sent back into the reply
        return f"<answer>x</answer> you sent {json.dumps(body)[:100]}"

    with (
        OpenAILoopback(reply=echo_env) as model,
        OpenAILoopback(require_key="another-key-entirely") as refusing,
    ):
        murl = model.url.replace("http://", f"http://{creds}")
        args = [
            "run", "--model", "leaky", "--cards", str(cards), "--bench", "synth",
            "--version", "n4-seed0", "--out", str(run_dir), "--quiet",
            "--endpoint", murl, "--api-key-env", "MY_SERVER_SECRET_VAR",
            "-o", f"extra_body={{api_key: {SECRETS['nested_option']}}}",
            "--judge", "openai-compatible", "--judge-model", "j",
            "--judge-endpoint", f"http://{creds}127.0.0.1:9/v1?key={SECRETS['judge_query']}",
        ]  # fmt: skip
        r = CliRunner().invoke(main, args)
        out += [r.output, repr(r.exception)]
        assert len(model.requests) == 4, r.output  # the run itself worked
        # a judge that cannot be reached, then one that refuses the key
        for ep in (f"http://{creds}127.0.0.1:9/v1?key={SECRETS['query_key']}", refusing.url):
            r = CliRunner().invoke(
                main,
                ["judge", str(run_dir), "--judge", "openai-compatible", "--judge-model", "j",
                 "--judge-endpoint", ep, "--no-progress"],
            )  # fmt: skip
            out += [r.output, repr(r.exception)]
        r = CliRunner().invoke(
            main,
            ["caption", "--bench", "synth", "--version", "n4-seed0", "--captioner",
             "openai-compatible", "--model", "c", "--endpoint", murl,
             "--out", str(tmp_path / "caps.jsonl")],
        )  # fmt: skip
        out += [r.output, repr(r.exception)]
    for args in (
        ["adapters", "show", "leaky", "--cards", str(cards)],
        ["report", str(run_dir), "--no-figures"],
        ["leaderboard", "add", str(run_dir), "--leaderboard", str(tmp_path / "lb.yaml")],
    ):
        r = CliRunner().invoke(main, args)
        out += [r.output, repr(r.exception)]

    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert "extra_body" in json.dumps(manifest)  # the option was recorded, its secret was not
    texts = out + [caplog.text]
    written = [p for p in tmp_path.rglob("*") if p.is_file() and p != cards]  # cards: our input
    texts += [p.read_bytes().decode("latin-1") for p in written]
    assert len(texts) > 12
    assert _leaks(texts) == []
