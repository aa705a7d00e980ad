"""Robustness protocols over a finished run (issue 37): choice-order consistency
(``orderings``), an audio-necessity verdict per item (``necessity``) and reasoning-budget sweeps
(``budgets``). The protocol logic (remapping, labels, statistics, budget identities) lives in
those pure modules; ``steps`` and ``cli`` are the thin glue that runs them on run folders."""
