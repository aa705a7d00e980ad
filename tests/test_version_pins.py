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


LOCK = PYPROJECT.parent / "requirements" / "test.lock"
#: the extras `make test` installs (Makefile EXTRAS, `llama` by make server-deps, `cascade` by
#: make cascade-deps)
TEST_EXTRAS = ("hf", "api", "train", "dev", "official", "llama", "cascade")


def _lock_pins() -> dict[str, Version]:
    from packaging.utils import canonicalize_name

    pins = {}
    for line in LOCK.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, pin = line.partition("==")
            assert pin, f"{LOCK}: {line!r} is not a name==version pin"
            pins[canonicalize_name(name)] = Version(pin)
    return pins


def _test_requirements() -> list[Requirement]:
    data = tomllib.loads(PYPROJECT.read_text())["project"]
    reqs = [Requirement(r) for r in data["dependencies"]]
    return reqs + [r for e in TEST_EXTRAS for r in _extras()[e]]


def test_lock_pins_every_test_requirement_inside_the_pyproject_range():
    from packaging.utils import canonicalize_name

    pins = _lock_pins()
    assert pins[canonicalize_name("torch")].public == "2.13.0"  # the CPU build on this disk
    for req in _test_requirements():
        pin = pins.get(canonicalize_name(req.name))
        assert pin is not None, f"{req.name} is not in {LOCK.name} (run `make lock`)"
        assert req.specifier.contains(pin, prereleases=True), f"{req.name}=={pin} vs {req}"


def test_installed_versions_are_the_lock_or_inside_the_ranges():
    """`make test` sets CAFE_LOCK: every locked package installed is at its pin. Without it
    (`make test-latest`, a user's pytest) each requirement's installed version is in range."""
    import os

    from packaging.utils import canonicalize_name

    if os.environ.get("CAFE_LOCK"):
        from importlib.metadata import PackageNotFoundError

        missing, wrong = [], []
        for name, pin in _lock_pins().items():
            try:
                got = Version(version(name))
            except PackageNotFoundError:
                missing.append(name)
                continue
            if got != pin:
                wrong.append(f"{name} {got} (lock: {pin})")
        assert not wrong, f"installed versions differ from {LOCK.name}: {wrong}"
        assert not missing, f"locked but not installed: {missing}"
    for req in _test_requirements():
        got = Version(version(canonicalize_name(req.name)))
        assert req.specifier.contains(got, prereleases=True), f"{req.name} {got} vs {req}"
