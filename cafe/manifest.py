"""What ran, for manifest.json: model card, checkpoint fingerprint, benchmark version and file
hash, prompt hash, seeds, package versions and git commit. Never a secret: options pass through
cafe.redaction.scrub (credential-named keys at any depth, URL credentials, key values), and API
keys only ever live in the environment."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import subprocess
import sys
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

PACKAGES = (
    "cafe-audio-eval",
    "numpy",
    "scipy",
    "soundfile",
    "torch",
    "transformers",
    "vllm",
    "openai",
    "google-genai",
    "trl",
    "peft",
)
_SMALL = 1 << 20  # files up to 1 MiB (configs, tokenizers) are hashed whole


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def without_secrets(options: dict[str, Any]) -> dict[str, Any]:
    """``options`` safe for manifest.json (see cafe.redaction.scrub)."""
    from cafe.redaction import scrub

    return scrub(dict(options))


def card_dict(card: Any) -> dict[str, Any]:
    """A model card (cafe.adapters.base.ModelCard, a dataclass) as manifest.json keeps it."""
    d = dataclasses.asdict(card)
    d["options"] = without_secrets(d.get("options") or {})
    return d


def checkpoint_fingerprint(path: str | Path | None) -> str | None:
    """A content fingerprint of a local checkpoint directory or file, cheap enough for 15 GB:
    small files hashed whole, large ones by size plus their first and last MiB. Copying a
    checkpoint keeps it; retraining into the same folder changes it. None for hub ids / APIs."""
    if path is None:
        return None
    p = Path(path)
    if not p.exists():
        return None
    files = sorted(f for f in p.rglob("*") if f.is_file()) if p.is_dir() else [p]
    h = hashlib.sha256()
    for f in files:
        rel = f.relative_to(p).as_posix() if p.is_dir() else f.name
        if rel.startswith(".") or "/." in rel:  # .cache, .git: not part of the weights
            continue
        size = f.stat().st_size
        h.update(f"{rel}\0{size}\0".encode())
        with f.open("rb") as fh:
            if size <= _SMALL:
                h.update(fh.read())
            else:
                h.update(fh.read(_SMALL))
                fh.seek(-_SMALL, os.SEEK_END)
                h.update(fh.read(_SMALL))
    return h.hexdigest()


def package_versions() -> dict[str, str]:
    out = {"python": sys.version.split()[0]}
    for name in PACKAGES:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            continue
    return out


def git_commit() -> str | None:
    """The commit of the cafe checkout in use (None when installed from a wheel, or when git
    does not answer within its timeout: a run never waits on it)."""
    root = Path(__file__).resolve().parent.parent
    if not (root / ".git").exists():
        return None
    head = _git(root, "rev-parse", "HEAD")
    if head is None:
        return None
    dirty = _git(root, "status", "--porcelain", "--untracked-files=no")
    return head + "-dirty" if dirty else head  # a status that timed out: no mark


#: the longest a git look-up may take before the manifest does without it
GIT_TIMEOUT_S = 5.0


def _git(root: Path, *args: str) -> str | None:
    """git's stdout for ``args`` in ``root``; None when it fails or takes too long."""
    try:
        out = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                             timeout=GIT_TIMEOUT_S)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def environment() -> dict[str, Any]:
    return {"packages": package_versions(), "git_commit": git_commit()}
