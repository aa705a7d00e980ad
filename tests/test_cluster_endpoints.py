"""The endpoints `cafe serve` writes, as every chat client reads them (``--endpoint @FILE``),
and what the replicas behind them must agree on; no Ray cluster is started here (the two-node
tests are tests/test_cluster.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from cafe.cli import main
from cafe.clients.openai_compat import OpenAICompatClient
from cafe.cluster import endpoints
from cafe.errors import ConfigError
from cafe.testing.loopback import OpenAILoopback


def listing(*urls: str) -> endpoints.EndpointList:
    return endpoints.EndpointList(served_model="m", endpoints=list(urls), engine="llama-cpp")


def test_an_endpoint_file_expands_into_the_client_s_endpoints(tmp_path):
    path = tmp_path / "eps.json"
    endpoints.write(path, listing("http://127.0.0.1:9001/v1", "http://127.0.0.1:9002/v1"))
    assert endpoints.read(path).served_model == "m"
    client = OpenAICompatClient("m", ["http://127.0.0.1:9000/v1", f"@{path}"])
    ports = [e.url.rsplit(":", 1)[1] for e in client.endpoints]
    assert ports == ["9000/v1", "9001/v1", "9002/v1"]
    text = tmp_path / "eps.txt"  # or plain lines, as a Slurm script writes them
    text.write_text("# replicas\nhttp://10.0.0.1:8000/v1\n\nhttp://10.0.0.2:8000/v1\n")
    assert endpoints.expand([f"@{text}"]) == ["http://10.0.0.1:8000/v1", "http://10.0.0.2:8000/v1"]


@pytest.mark.parametrize(
    ("content", "said"),
    [(None, "cannot read the endpoint file"), ('{"served_model": "m", "endpoints": []}',
     "field endpoints: no replica is listed"), ("{not json", "not an endpoint file")],
)  # fmt: skip
def test_an_unusable_endpoint_file_is_one_line_naming_it(tmp_path, content, said):
    path = tmp_path / "eps.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ConfigError) as e:
        endpoints.expand([f"@{path}"])
    assert str(path) in str(e.value) and said in str(e.value)


def test_an_endpoint_file_that_is_a_fifo_or_lists_a_string_is_refused_not_waited_on(tmp_path):
    import os

    fifo = tmp_path / "eps.fifo"
    os.mkfifo(fifo)  # read by path it would block until a writer came
    with pytest.raises(ConfigError, match="not a regular file") as e:
        endpoints.expand([f"@{fifo}"])
    assert str(fifo) in str(e.value)
    text = tmp_path / "eps.json"  # a string, not a list: not one replica per character
    text.write_text(json.dumps({"served_model": "m", "endpoints": "http://127.0.0.1:9/v1"}))
    with pytest.raises(ConfigError, match="field endpoints"):
        endpoints.expand([f"@{text}"])


def test_a_replica_log_named_by_the_model_stays_in_the_log_folder(tmp_path):
    from cafe.cluster.replicas import log_path

    for name in ("Qwen/Qwen3-32B", "../../etc/passwd", "a/../../b"):
        p = log_path(tmp_path, name, "t", 0)
        assert p.parent == tmp_path and "/" not in p.name, p


def _run(tmp_path, eps, name: str):
    return CliRunner().invoke(main, [
        "run", "--model", "openai-compatible", "-o", "model=m", "--endpoint", f"@{eps}",
        "--limit", "2", "--out", str(tmp_path / name), "--no-progress", "--no-cache"])  # fmt: skip


def test_replicas_reporting_different_models_stop_the_run(tmp_path):
    one = {"id": "m", "root": "/weights/a", "owned_by": "vllm"}
    two = {"id": "m", "root": "/weights/b", "owned_by": "vllm"}
    with OpenAILoopback(models=[one]) as a, OpenAILoopback(models=[two]) as b:
        eps = tmp_path / "eps.json"
        endpoints.write(eps, listing(a.url, b.url))
        res = _run(tmp_path, eps, "mixed")
        assert res.exit_code == 1
        assert "the replicas serve different models" in res.output
        assert a.url in res.output and b.url in res.output and "/weights/b" in res.output
        assert not a.requests and not b.requests  # refused before any model call


def test_replicas_from_a_serve_file_leave_their_urls_out_of_the_served_identity(tmp_path):
    same = {"id": "m", "root": "/weights/a", "owned_by": "vllm"}
    with OpenAILoopback(models=[same]) as a, OpenAILoopback(models=[same]) as b:
        eps = tmp_path / "eps.json"
        endpoints.write(eps, listing(a.url, b.url))
        res = _run(tmp_path, eps, "same")
        assert res.exit_code == 0, res.output
        served = json.loads((tmp_path / "same" / "manifest.json").read_text())["served_model"]
        # restarted replicas listen on other ports: the cache must still hit
        assert served == {"reported": [same]}
        assert len(a.requests) + len(b.requests) == 2 and a.requests and b.requests


def test_placement_flags_go_with_engine_ray():
    res = CliRunner().invoke(main, ["run", "--actors", "2"])
    assert res.exit_code == 2 and "--engine ray" in res.output
    res = CliRunner().invoke(main, ["run", "--actor-grace", "3"])
    assert res.exit_code == 2 and "--engine ray" in res.output


def test_the_actor_grace_reaches_the_ray_options_only_when_given():
    from cafe.cluster.cli import placement

    # a re-run on a cluster that lost a node need not wait the default grace for an actor
    # that has no room (the pool's grace_s keyword)
    assert placement("ray", "auto", 2, 0.0, 3.0) == {
        "ray": {"address": "auto", "actors": 2, "gpus": 0.0, "grace_s": 3.0}}  # fmt: skip
    assert "grace_s" not in placement("ray", None, 2, 0.0)["ray"]  # the pool's own default
    assert placement("local", None, 1, 0.0) == {}


def test_cafe_help_and_a_plain_run_import_no_ray(tmp_path):
    code = (
        "import sys; from click.testing import CliRunner; from cafe.cli import main; "
        "r = CliRunner().invoke(main, ['--help']); assert r.exit_code == 0, r.output; "
        "r = CliRunner().invoke(main, ['serve', '--help']); assert r.exit_code == 0; "
        "print('ray' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_a_dead_replica_is_dropped_and_its_calls_go_to_the_others():
    """A replica that stops answering opens its own breaker; calls chosen for it go on to the
    others instead of stopping the command (only all replicas dead stop it)."""
    import asyncio

    from cafe.clients.breaker import ServerUnreachable

    with OpenAILoopback(reply=lambda body: "ok") as live, OpenAILoopback() as dead:
        dead.stop()  # nothing listens there any more: refused
        client = OpenAICompatClient("m", [dead.url, live.url], concurrency=2, base_delay=0.001)

        async def calls(n: int) -> list:
            try:
                msg = [{"role": "user", "content": "hi"}]
                return list(await asyncio.gather(*(client.achat(msg) for _ in range(n))))
            finally:
                await client.aclose()

        replies = asyncio.run(calls(8))
        assert [r.text for r in replies] == ["ok"] * 8 and len(live.requests) == 8
        assert client.endpoints[0].breaker.is_open and not client.endpoints[1].breaker.is_open
        live.stop()  # the last one gone too: the command stops, naming the server
        with pytest.raises(ServerUnreachable):
            asyncio.run(calls(2))


def test_a_cluster_address_where_nothing_listens_is_one_line_of_cafe(tmp_path):
    """--ray 127.0.0.1:1: refused at once with cafe's line, not minutes of Ray's retries."""
    code = "from cafe.cluster.session import connect\nconnect('127.0.0.1:1')"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, cwd=tmp_path)  # fmt: skip
    assert out.returncode != 0
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("cafe.cluster.session.ClusterError: cannot join the Ray cluster at "
                           "127.0.0.1:1:"), out.stderr[-2000:]  # fmt: skip
    assert "ray start --head" in last


def _eps(path, url: str, checkpoint: str = ""):
    listed = endpoints.EndpointList("m", [url], engine="llama-cpp", checkpoint=checkpoint)
    endpoints.write(path, listed)
    return f"@{path}"


def _run_on(tmp_path, name: str, *eps: str, cache: bool = False):
    flags = [x for e in eps for x in ("--endpoint", e)]
    cached = [] if cache else ["--no-cache"]
    return CliRunner().invoke(main, [
        "run", "--model", "openai-compatible", "-o", "model=m", *flags, "--limit", "2",
        "--out", str(tmp_path / name), "--no-progress", *cached])  # fmt: skip


#: what llama.cpp's servers list on GET /models: the alias, whatever GGUF is loaded
ALIAS_ONLY = [{"id": "m", "object": "model", "owned_by": "llamacpp"}]


def test_two_serves_of_other_weights_under_one_name_are_refused_together(tmp_path):
    """Two `cafe serve` of different GGUFs, one --served-name: GET /models says the same alias
    on both; the checkpoints their endpoint files record differ, so one run refuses them."""
    with OpenAILoopback(models=ALIAS_ONLY) as a, OpenAILoopback(models=ALIAS_ONLY) as b:
        one = _eps(tmp_path / "a.json", a.url, "sha256-size-head-tail:aaaa")
        two = _eps(tmp_path / "b.json", b.url, "sha256-size-head-tail:bbbb")
        res = _run_on(tmp_path, "mixed", one, two)
        assert res.exit_code == 1, res.output
        assert "the replicas serve different models" in res.output and ":bbbb" in res.output
        assert not a.requests and not b.requests  # refused before any model call


def test_a_serve_of_other_weights_does_not_replay_the_first_ones_answers(tmp_path, monkeypatch):
    """`cafe serve --model M`, then `cafe serve --model M --checkpoint other.gguf` (here on the
    same port): the second file's runs are not answered from the first weights' cache."""
    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    with OpenAILoopback(models=ALIAS_ONLY) as srv:
        first = _eps(tmp_path / "first.json", srv.url, "sha256-size-head-tail:aaaa")
        assert _run_on(tmp_path, "first", first, cache=True).exit_code == 0
        assert srv.count == 2
        again = _run_on(tmp_path, "again", first, cache=True)  # same weights: cached
        assert again.exit_code == 0 and srv.count == 2
        other = _eps(tmp_path / "other.json", srv.url, "sha256-size-head-tail:bbbb")
        assert _run_on(tmp_path, "other", other, cache=True).exit_code == 0
        assert srv.count == 4  # asked again: other weights, other answers


def test_a_served_model_known_by_name_only_is_keyed_by_its_urls_whatever_names_them(tmp_path):
    """No weights identity (an endpoint file without a checkpoint, a server without GET
    /models): the URLs stay in the served identity, as the warning says."""
    with OpenAILoopback() as srv:
        res = _run_on(tmp_path, "plain", _eps(tmp_path / "eps.json", srv.url))
        assert res.exit_code == 0, res.output
        served = json.loads((tmp_path / "plain" / "manifest.json").read_text())["served_model"]
        assert served["endpoints"] == [srv.url]
        assert "keyed by these endpoint URLs" in res.output


def test_a_served_gguf_is_checked_and_known_by_its_weights(tmp_path):
    from cafe.adapters.base import ModelCard
    from cafe.cluster.servers import server_command

    card = ModelCard.from_dict("m", {"adapter": "llama-cpp"})
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"<html>404</html>" * 10)  # a download that saved an error page
    with pytest.raises(ConfigError, match=r"bad\.gguf: not a GGUF file"):
        server_command(card, str(bad), None)
    one, two = tmp_path / "one.gguf", tmp_path / "two.gguf"
    one.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\x01" * 4096)
    two.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\x02" * 4096)
    ids = [server_command(card, str(p), "m").checkpoint for p in (one, two, one)]
    assert ids[0] == ids[2] != ids[1] and ids[0].startswith("sha256-size-head-tail:")
    res = CliRunner().invoke(main, ["serve", "--model", "llama-cpp", "--checkpoint", str(bad)])
    assert res.exit_code == 1 and "not a GGUF file" in res.output
    assert "Traceback" not in res.output


def test_hostile_endpoint_files_are_one_line_or_one_endpoint(tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text("{" + '"a":[' * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(ConfigError, match="deep.json: not an endpoint file"):
        endpoints.expand([f"@{deep}"])
    dup = tmp_path / "dup.txt"  # one URL listed 100,000 times: one endpoint, not 100,000
    dup.write_text("http://127.0.0.1:9/v1\n" * 100_000)
    assert endpoints.expand([f"@{dup}", "http://127.0.0.1:9/v1"]) == ["http://127.0.0.1:9/v1"]


def test_a_second_serve_neither_takes_over_nor_removes_anothers_endpoint_file(tmp_path):
    """An endpoint file whose replica answers belongs to a running `cafe serve`: a second one
    naming it is refused before any cluster starts; a serve removes the file on exit only
    while it still holds what that serve wrote."""
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\x00" * 64)
    with OpenAILoopback(models=ALIAS_ONLY) as running:
        eps = tmp_path / "eps.json"
        theirs = endpoints.EndpointList("m", [running.url], engine="llama-cpp")
        endpoints.write(eps, theirs)
        before = eps.read_bytes()
        res = CliRunner().invoke(main, ["serve", "--model", "llama-cpp", "--checkpoint",
                                        str(gguf), "--endpoints-file", str(eps)])  # fmt: skip
        assert res.exit_code == 1 and "another `cafe serve` keeps this endpoint file" in res.output
        assert running.url in res.output and eps.read_bytes() == before
    mine = endpoints.EndpointList("m", ["http://127.0.0.1:9/v1"], engine="llama-cpp")
    endpoints.remove_if_ours(eps, mine)  # the file is theirs: kept
    assert eps.read_bytes() == before
    endpoints.remove_if_ours(eps, theirs)
    assert not eps.exists()
