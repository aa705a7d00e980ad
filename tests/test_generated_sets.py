"""`cafe bench synth|spoken --out DIR` writes a set as one transaction into a folder it owns: never
through a link, never over the user's own files (their `<bench>-*.wav` too), a killed or failed
write leaves the earlier set whole; espeak-ng is bounded in time and a bad clip from it is one
line (a fake espeak-ng on PATH plays the faults; the real one is tested in test_cascade)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner

from cafe.benchmarks.cli import bench_command
from cafe.benchmarks.synth.generator import generate
from cafe.errors import CafeError


def _bench(*args: str):
    return CliRunner().invoke(bench_command, list(args))


def test_a_link_in_the_folder_is_never_written_through(tmp_path: Path) -> None:
    out = tmp_path / "set"
    precious = tmp_path / "precious.txt"
    precious.write_text("mine")
    out.mkdir()
    (out / "synth.jsonl").symlink_to(precious)
    res = _bench("synth", "--out", str(out), "--limit", "2")
    assert res.exit_code != 0 and "synth.jsonl" in res.output, res.output
    assert "Traceback" not in res.output and precious.read_text() == "mine"


def test_a_linked_audio_folder_keeps_its_own_clips(tmp_path: Path) -> None:
    mine = tmp_path / "my-audio"
    mine.mkdir()
    (mine / "synth-00007.wav").write_bytes(b"my recording")
    out = tmp_path / "set"
    generate(out, n=2, seed=0)
    (out / "audio").rename(tmp_path / "gone")
    (out / "audio").symlink_to(mine)
    with pytest.raises(CafeError, match="audio"):
        generate(out, n=2, seed=0)
    assert [p.name for p in mine.iterdir()] == ["synth-00007.wav"]


def test_the_users_own_clips_in_a_folder_are_never_deleted(tmp_path: Path) -> None:
    out = tmp_path / "set"
    (out / "audio").mkdir(parents=True)
    (out / "audio" / "synth-00042.wav").write_bytes(b"my recording")
    res = _bench("synth", "--out", str(out), "--limit", "2")
    assert res.exit_code != 0 and "cafe did not write" in res.output, res.output
    assert (out / "audio" / "synth-00042.wav").read_bytes() == b"my recording"
    assert not (out / "synth.jsonl").exists()


def test_a_set_it_wrote_is_replaced_whole_and_a_foreign_file_beside_it_refused(
    tmp_path: Path,
) -> None:
    out = tmp_path / "set"
    generate(out, n=4, seed=0)
    generate(out, n=2, seed=1)  # its own set: replaced, the larger set's clips gone
    assert sorted(p.name for p in (out / "audio").iterdir()) == [
        "synth-00000.wav",
        "synth-00001.wav",
    ]
    assert len((out / "synth.jsonl").read_text().splitlines()) == 2
    (out / "audio" / "synth-00009.wav").write_bytes(b"the user's")
    with pytest.raises(CafeError, match="synth-00009.wav"):
        generate(out, n=2, seed=0)
    assert (out / "audio" / "synth-00009.wav").read_bytes() == b"the user's"


def test_a_failed_write_leaves_the_earlier_set_whole(tmp_path: Path, monkeypatch) -> None:
    from cafe.benchmarks.synth import generator as g

    out = tmp_path / "set"
    generate(out, n=3, seed=0)
    before = {p.name: p.read_bytes() for p in [out / "synth.jsonl", *(out / "audio").iterdir()]}
    real = g.make_item

    def fail_late(index: int, seed: int):
        if index == 2:
            raise RuntimeError("killed")
        return real(index, seed)

    monkeypatch.setattr(g, "make_item", fail_late)
    with pytest.raises(RuntimeError):
        generate(out, n=3, seed=5)
    after = {p.name: p.read_bytes() for p in [out / "synth.jsonl", *(out / "audio").iterdir()]}
    assert after == before  # no clip of the failed set written over the earlier one's
    assert [p.name for p in tmp_path.iterdir()] == ["set"]  # no temporary folder left


def _fake_espeak(bin_dir: Path, body: str) -> None:
    bin_dir.mkdir()
    exe = bin_dir / "espeak-ng"
    exe.write_text("#!/bin/sh\n" + 'if [ "$1" = "--version" ]; then echo "eSpeak NG '
                   'text-to-speech: 1.51 Data at: x"; exit 0; fi\n' + body)  # fmt: skip
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)


def test_a_bad_clip_from_espeak_is_one_line(tmp_path: Path, monkeypatch) -> None:
    # writes a file that is no WAV where -w says (the path follows -w: 8th argument)
    _fake_espeak(tmp_path / "bin", 'printf "not audio" > "$8"\n')
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    res = _bench("spoken", "--out", str(tmp_path / "s"), "--limit", "2")
    assert res.exit_code != 0, res.output
    assert "spoken-00000" in res.output and "no readable WAV" in res.output, res.output
    assert "Traceback" not in res.output and not (tmp_path / "s").exists()


def test_espeak_that_hangs_is_stopped(tmp_path: Path, monkeypatch) -> None:
    from cafe.benchmarks.spoken import generator as g

    _fake_espeak(tmp_path / "bin", "sleep 30\n")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(g, "ESPEAK_TIMEOUT_S", 0.5)
    res = _bench("spoken", "--out", str(tmp_path / "s"), "--limit", "1")
    assert res.exit_code != 0 and "did not speak" in res.output, res.output
