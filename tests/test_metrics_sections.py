"""metrics.json sections are typed and versioned: the store stamps the version on write, reads
old (unversioned) folders as version 1, keeps keys it does not type, and refuses a section from
a newer cafe with one line naming the file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cafe.folder.sections import AccuracySection, CafeSection, SectionError
from cafe.reports.leaderboard import LeaderboardError, row_from_run
from cafe.store import RunStore

CELL = {"correct": 1, "total": 2, "acc": 50.0}


def test_section_round_trip_and_version_stamp(tmp_path: Path) -> None:
    store = RunStore(tmp_path).create()
    store.update_metrics("accuracy", {"total": CELL, "unanswered": 1, "bench": {"name": "x"}})
    raw = json.loads((tmp_path / "metrics.json").read_text())["accuracy"]
    assert raw["version"] == 1 and raw["total"] == CELL and raw["bench"] == {"name": "x"}
    acc = store.read_section(AccuracySection)
    assert acc is not None and acc.acc == 50.0 and acc.unanswered == 1
    assert acc.extra == {"bench": {"name": "x"}}
    assert store.read_section(CafeSection) is None
    store.write_section(CafeSection(acc_per=80.0, extra={"judge": {"judge": "rule-v1"}}))
    caf = store.read_section(CafeSection)
    assert caf is not None and caf.acc_per == 80.0 and caf.mode == "micro"
    assert caf.extra["judge"] == {"judge": "rule-v1"}


def test_unversioned_section_of_an_old_folder_reads_as_version_1(tmp_path: Path) -> None:
    (tmp_path / "metrics.json").write_text(json.dumps({"accuracy": {"total": CELL}}))
    acc = RunStore(tmp_path).read_section(AccuracySection)
    assert acc is not None and acc.total == CELL


def test_newer_section_is_refused_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "manifest.json").write_text(json.dumps({"model": {"name": "m"}}))
    (tmp_path / "metrics.json").write_text(json.dumps({"accuracy": {"version": 2, "total": CELL}}))
    with pytest.raises(SectionError) as err:
        RunStore(tmp_path).read_section(AccuracySection)
    assert str(err.value) == (
        f"{tmp_path / 'metrics.json'}: section 'accuracy' is version 2, written by a newer cafe "
        "(this one reads up to 1): upgrade cafe"
    )
    with pytest.raises(LeaderboardError, match="written by a newer cafe"):
        row_from_run(tmp_path, group="Baseline")


def test_a_section_without_its_headline_is_refused(tmp_path: Path) -> None:
    store = RunStore(tmp_path).create()
    with pytest.raises(SectionError, match="section 'accuracy' lacks total"):
        store.update_metrics("accuracy", {"unanswered": 3})
