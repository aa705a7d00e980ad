"""Suite-wide guards: no test reaches the network (loopback only) or a model hub."""

from __future__ import annotations

import ipaddress
import os
import socket
import tempfile

import pytest
import slow_writes

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# one fresh cache per test session: no test reads a developer's ~/.cache/cafe or leaves one
os.environ["CAFE_CACHE"] = tempfile.mkdtemp(prefix="cafe-test-cache-")

_real_connect = socket.socket.connect


def _loopback_only(self: socket.socket, address, *args, **kwargs):  # type: ignore[no-untyped-def]
    if self.family in (socket.AF_INET, socket.AF_INET6):
        host = address[0]
        try:
            ok = ipaddress.ip_address(host).is_loopback
        except ValueError:
            ok = host == "localhost"
        if not ok:
            raise OSError(f"test tried to reach {host}: tests use loopback servers only")
    return _real_connect(self, address, *args, **kwargs)


socket.socket.connect = _loopback_only  # type: ignore[method-assign]

# the timing audit's slowed writer, when CAFE_TEST_SLOW_WRITES=SECONDS is set (slow_writes.py)
slow_writes.install()

#: the real MMAU/MMAR metadata: $CAFE_TEST_DATA (a folder holding mmau/ and mmar/), else the
#: repository's sibling shared/data
SHARED_DATA = os.environ.get("CAFE_TEST_DATA") or os.path.join(
    os.path.dirname(__file__), "..", "..", "shared", "data"
)


@pytest.fixture
def shared_data() -> str:
    """The real benchmark metadata; tests using it skip where it is absent, saying where to
    point CAFE_TEST_DATA."""
    path = os.path.abspath(os.path.expanduser(SHARED_DATA))
    if not os.path.isdir(path):
        pytest.skip(
            f"real MMAU/MMAR metadata not found at {path}: set CAFE_TEST_DATA to a folder "
            "holding mmau/ and mmar/ to run the official-scoring agreement tests"
        )
    return path
