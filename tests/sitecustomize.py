"""Cafe subprocesses started by tests (tests/ on their path): the slowed writer of the timing
audit when ``CAFE_TEST_SLOW_WRITES`` is set (slow_writes.py); nothing otherwise."""

import os

if os.environ.get("CAFE_TEST_SLOW_WRITES"):
    try:
        import slow_writes

        slow_writes.install()
    except ImportError:  # a subprocess without cafe on its path: nothing to slow
        pass
