"""The run-folder contract (DESIGN.md "cafe/folder/"): what each metrics.json section is, what
it is derived from, and what happens to it when those inputs change (``sections``); the run's
and each step's status by counts (``status``). The files themselves are named by cafe.store."""
