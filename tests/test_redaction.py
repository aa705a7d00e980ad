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


SHAPES = {
    "camel_token": "PLANT11camelTok",
    "camel_secret": "PLANT12camelSecret",
    "header_key": "PLANT13headerKey",
    "session_token": "PLANT14session",
    "access_key": "PLANT15access",
    "client_secret": "PLANT16client",
    "oauth_code": "PLANT17code",
    "amz_token": "PLANT18amz",
    "subscription_key": "PLANT19sub",
    "basic_pass": "PLANT20basicpass",
    "bare_pass": "PLANT21barepass",
}


def test_secrets_are_found_by_shape_in_any_case_style_and_at_any_depth():
    s = SHAPES
    opts = {
        "extra_body": {"authToken": s["camel_token"],
                       "deep": [{"clientSecret": s["camel_secret"]}]},
        "headers": {"X-Api-Key": s["header_key"], "X-Request-Id": "r1"},
        "max_new_tokens": 64, "pad_token": "<pad>", "api_key_env": "MY_VAR",
    }  # fmt: skip
    assert scrub(opts) == {
        "extra_body": {"deep": [{}]},
        "headers": {"X-Request-Id": "r1"},
        "max_new_tokens": 64, "pad_token": "<pad>", "api_key_env": "MY_VAR",
    }  # fmt: skip
    url = (
        f"https://h.example/cb?session_token={s['session_token']}&access_key={s['access_key']}"
        f"&client_secret={s['client_secret']}&code={s['oauth_code']}"
        f"&X-Amz-Security-Token={s['amz_token']}&subscription-key={s['subscription_key']}&page=2"
    )
    assert scrub_text(url) == (
        "https://h.example/cb?session_token=***&access_key=***&client_secret=***&code=***"
        "&X-Amz-Security-Token=***&subscription-key=***&page=2"
    )
    basic = __import__("base64").b64encode(f"u:{s['basic_pass']}".encode()).decode()
    text = (
        f"proxy said: Authorization: Basic {basic}; via u:{s['bare_pass']}@proxy.example:3128; "
        f'echo {{"authToken": "{s["camel_token"]}", "clientSecret": \'{s["camel_secret"]}\'}} '
        f"and extra_body={{api_key: {s['header_key']}"
    )
    out = scrub_text(text)
    assert _leaks_of(SHAPES, [out]) == [] and basic not in out, out
    assert "Authorization: Basic ***" in out and "***@proxy.example:3128" in out
    # ordinary text keeps its words: a musical key, a token count, basic understanding, e-mail
    plain = "The key: C major; token: 5; basic understanding. Basic idea. Mail a@b.org"
    assert scrub_text(plain) == plain


def _leaks_of(secrets: dict[str, str], texts: list[str]) -> list[tuple[str, str]]:
    return [(name, t[:200]) for t in texts for name, v in secrets.items() if v in t]


def test_a_yaml_error_in_an_option_never_quotes_the_value(tmp_path):
    """PyYAML's own message quotes the text around the error (the key, twice)."""
    r = CliRunner().invoke(
        main,
        ["run", "--bench", "synth", "--version", "n4-seed0", "--out", str(tmp_path / "run"),
         "-o", f"extra_body={{api_key: {SHAPES['header_key']}"],
    )  # fmt: skip
    assert r.exit_code == 2 and "extra_body" in r.output and "not valid YAML" in r.output
    assert SHAPES["header_key"] not in r.output + repr(r.exception)
    assert "Traceback" not in r.output


def test_scrub_exception_cleans_a_parsers_own_message():
    import yaml

    from cafe.redaction import scrub_exception

    try:
        yaml.safe_load(f"extra_body: {{api_key: {SHAPES['header_key']}")
    except yaml.YAMLError as e:
        assert SHAPES["header_key"] in str(e)  # PyYAML quotes the text in its snippet
        assert SHAPES["header_key"] not in str(scrub_exception(e))


def test_shaped_secrets_reach_no_manifest_cache_prediction_page_or_line(tmp_path, monkeypatch):
    """camelCase names in -o extra_body (manifest, calls.sqlite), and a hostile server echoing
    credential query parameters, a Basic header and user:pass@ into its replies."""
    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    s = SHAPES
    basic = __import__("base64").b64encode(f"u:{s['basic_pass']}".encode()).decode()
    echo = (
        f"<answer>x</answer> GET /cb?session_token={s['session_token']}&access_key="
        f"{s['access_key']}&client_secret={s['client_secret']}&code={s['oauth_code']}"
        f"&X-Amz-Security-Token={s['amz_token']}&subscription-key={s['subscription_key']} "
        f"Authorization: Basic {basic} via http://u:{s['bare_pass']}@proxy.example/"
    )
    run_dir = tmp_path / "run"
    with OpenAILoopback(reply=lambda body: echo) as srv:
        r = CliRunner().invoke(
            main,
            ["run", "--model", "openai-compatible", "-o", "model=m", "--endpoint", srv.url,
             "--bench", "synth", "--version", "n4-seed0", "--out", str(run_dir), "--judge", "none",
             "-o", f"extra_body={{authToken: {s['camel_token']}, "
                   f"nested: {{clientSecret: {s['camel_secret']}}}, X-Api-Key: {s['header_key']}}}",
             "--no-progress"],
        )  # fmt: skip
        assert r.exit_code == 0, r.output
        sent = json.dumps(srv.requests[0])
    assert s["camel_token"] in sent  # the server got its body: only what we write is scrubbed
    out = [r.output]
    r = CliRunner().invoke(main, ["report", str(run_dir), "--no-figures"])
    out.append(r.output)
    manifest = (run_dir / "manifest.json").read_text()
    assert "extra_body" in manifest
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    names = {p.name for p in written}
    assert "calls.sqlite" in names and "index.html" in names
    texts = out + [p.read_bytes().decode("latin-1") for p in written]
    assert _leaks_of(SHAPES, texts) == [] and not any(basic in t for t in texts)


def test_a_client_identity_is_not_a_bare_credential():
    """``kind:model@URL`` (a chat client's identity, written in batch logs and judgements) has the
    shape user:pass@ but a URL after its @: left as it is, or a resumed batch no longer finds
    its own log lines; a real bare credential before a host is still masked."""
    from cafe.redaction import scrub_text

    ident = "openai-compatible:judge-m@http://127.0.0.1:8080/v1"
    assert scrub_text(ident) == ident
    assert scrub_text(f"proxy u:p4ss@proxy.example:3128 then {ident}") == (
        f"proxy ***@proxy.example:3128 then {ident}"
    )
