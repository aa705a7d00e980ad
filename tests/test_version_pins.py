"""The GPU extras' version pins, read from pyproject.toml: the vLLM range is the one the pinned
TRL accepts (read from TRL's own metadata) and lies where vLLM runs with transformers 5."""

from __future__ import annotations

from importlib.metadata import requires, version
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

from packaging.requirements import Requirement
from packaging.version import Version

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"
#: first vLLM release without its transformers < 5 requirement (vLLM's requirements/common.txt)
FIRST_VLLM_WITH_TRANSFORMERS_5 = Version("0.19.0")


def _extras() -> dict[str, list[Requirement]]:
    data = tomllib.loads(PYPROJECT.read_text())
    return {
        k: [Requirement(r) for r in v] for k, v in data["project"]["optional-dependencies"].items()
    }


def _one(reqs: list[Requirement], name: str) -> Requirement:
    (req,) = [r for r in reqs if r.name == name]
    return req


def test_vllm_range_is_what_trl_accepts_and_transformers_5_era():
    extras = _extras()
    ours = _one(extras["vllm"], "vllm").specifier
    trl_pin = _one(extras["train"], "trl").specifier
    assert str(trl_pin) == "==1.16.0" and version("trl") == "1.16.0"
    trl_vllm = next(
        Requirement(r.split(";")[0]) for r in requires("trl") if Requirement(r).name == "vllm"
    ).specifier
    assert {str(s) for s in ours} == {str(s) for s in trl_vllm} == {">=0.22.0", "<=0.31.0"}
    lower = Version(next(s.version for s in ours if s.operator == ">="))
    assert lower >= FIRST_VLLM_WITH_TRANSFORMERS_5
    for v in ("0.21.9", "0.32.0", "0.10.0"):
        assert Version(v) not in ours
    assert Version("0.25.1") in ours


def test_transformers_5_everywhere_it_is_required():
    extras = _extras()
    for extra in ("hf", "train"):
        spec = _one(extras[extra], "transformers").specifier
        assert Version("5.0.0") in spec and Version("4.57.0") not in spec
