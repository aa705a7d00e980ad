"""Every write is a transaction (issue 19): unique temporary names, fsync, rename; metrics
sections from concurrent processes all survive; a damaged manifest or metrics file is one line
naming the file and how to recover."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from cafe.errors import RunFolderError
from cafe.safe_files import replace_file
from cafe.store import RunStore, rewrite_jsonl, write_json_atomic

#: one process: M rounds, each replacing its own metrics section and the shared JSON file
WRITER = textwrap.dedent(
    """
    import os, sys, time
    from cafe.store import RunStore, write_json_atomic
    root, me, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
    store = RunStore(root)
    while not os.path.exists(os.path.join(root, "go")):  # every writer starts together
        time.sleep(0.005)
    for k in range(rounds):
        store.update_metrics(f"section-{me}", {"round": k, "pad": "x" * 4000})
        write_json_atomic(store.path("shared.json"), {"writer": me, "round": k, "pad": "y" * 4000})
    print("done", flush=True)
    """
)
#: reads both files until the writers are done; counts reads that were not whole JSON
READER = textwrap.dedent(
    """
    import json, os, sys
    root = sys.argv[1]
    bad = reads = 0
    while not os.path.exists(os.path.join(root, "stop")):
        for name in ("metrics.json", "shared.json"):
            try:
                with open(os.path.join(root, name), encoding="utf-8") as f:
                    json.loads(f.read())
                reads += 1
            except FileNotFoundError:
                pass
            except ValueError:
                bad += 1
    print(json.dumps({"bad": bad, "reads": reads}), flush=True)
    """
)
PROCESSES, ROUNDS = 4, 25


def test_concurrent_sections_all_survive_and_every_read_is_whole(tmp_path: Path) -> None:
    root = tmp_path / "run"
    root.mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "CAFE_LOCK_WAIT": "60"}
    reader = subprocess.Popen([sys.executable, "-c", READER, str(root)], env=env,
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    writers = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(root), str(i), str(ROUNDS)], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for i in range(PROCESSES)
    ]  # fmt: skip
    (root / "go").touch()
    for w in writers:
        out, err = w.communicate(timeout=120)
        assert w.returncode == 0 and out.strip() == "done", err
    (root / "stop").touch()
    seen = json.loads(reader.communicate(timeout=60)[0])
    metrics = json.loads((root / "metrics.json").read_text())
    assert {k: v["round"] for k, v in metrics.items()} == {
        f"section-{i}": ROUNDS - 1 for i in range(PROCESSES)
    }
    assert json.loads((root / "shared.json").read_text())["round"] == ROUNDS - 1
    assert seen["bad"] == 0 and seen["reads"] > 0
    assert not [p.name for p in root.iterdir() if p.name.endswith(".tmp")]  # none left behind


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "metrics.json"
    write_json_atomic(path, {"a": 1})

    def half(f) -> None:  # noqa: ANN001
        f.write('{"a": ')
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        replace_file(path, half)
    assert json.loads(path.read_text()) == {"a": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.json"]


def test_an_append_the_disk_cuts_short_is_taken_back_out(tmp_path: Path, monkeypatch) -> None:
    """A full disk part way through a batch's lines: the file is as it was before the batch
    (no half line, no buffer that lands later), and the next batch appends cleanly."""
    import errno

    from cafe.store import JsonlWriter

    path = tmp_path / "predictions.jsonl"
    real_write = os.write
    with JsonlWriter(path) as w:
        w.write_many([{"id": 1}])
        before = path.read_bytes()

        def short(fd: int, data) -> int:  # noqa: ANN001
            real_write(fd, bytes(data[:5]))  # some bytes land, then the disk is full
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(os, "write", short)
        with pytest.raises(OSError, match="No space"):
            w.write_many([{"id": 2}, {"id": 3}])
        monkeypatch.setattr(os, "write", real_write)
        assert path.read_bytes() == before and w.size == len(before)
        w.write_many([{"id": 4}])
    assert [json.loads(x)["id"] for x in path.read_text().splitlines()] == [1, 4]


def test_rewrite_jsonl_is_a_transaction_too(tmp_path: Path) -> None:
    from cafe.records import Judgement

    path = tmp_path / "judgements.jsonl"
    rec = Judgement(sample_id="a", run_index=0, judge="j", template_hash="t", raw_reply=None,
                    status="ok")  # fmt: skip
    rewrite_jsonl(path, [rec])
    assert [json.loads(x)["sample_id"] for x in path.open()] == ["a"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["judgements.jsonl"]
    assert oct(path.stat().st_mode & 0o777) == oct(0o644)  # not mkstemp's private mode


def test_a_damaged_manifest_or_metrics_is_one_line_naming_the_file(tmp_path: Path) -> None:
    from cafe.cli import main

    store = RunStore(tmp_path / "run").create()
    store.path("manifest.json").write_text('{"cafe": ')  # cut by a full disk
    with pytest.raises(RunFolderError) as err:
        store.read_manifest()
    assert str(store.path("manifest.json")) in str(err.value) and "\n" not in str(err.value)
    res = CliRunner().invoke(main, ["run", "--model", "random", "--bench", "synth", "--limit",
                                    "2", "--out", str(store.root), "--judge", "none"])  # fmt: skip
    assert res.exit_code == 1
    said = [x for x in res.output.splitlines() if x.startswith("Error")]  # not synth's progress
    assert len(said) == 1 and "manifest.json is damaged" in said[0], res.output
    assert "Traceback" not in res.output

    store.path("metrics.json").write_text("[1, 2")
    with pytest.raises(RunFolderError, match=r"metrics\.json is damaged .*delete it"):
        store.update_metrics("accuracy-extra", {"x": 1})
    assert store.path("metrics.json").read_text() == "[1, 2"  # nothing overwritten
