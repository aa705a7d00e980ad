"""Test and perf helpers shipped with the package: tiny local checkpoints and loopback servers
that speak the real wire protocols (used by tests/, perf/ and `cafe train smoke`)."""
