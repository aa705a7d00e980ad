# Two commands (README): `make run` sets everything up and runs the default job; `make test`
# runs the linter, the format check and the test suite. Both create .venv on first use.
VENV ?= .venv
PY := $(VENV)/bin/python
# CPU build from this machine's wheel cache; on a GPU machine set TORCH to your CUDA build
TORCH ?= torch==2.13.0
EXTRAS ?= hf,api,train,dev

.PHONY: setup run test lint chromium
setup: $(VENV)/.installed

# the HTML report tests open pages in Debian's headless Chromium (Playwright drives it; its own
# browser download is not used)
chromium:
	command -v chromium >/dev/null || (apt-get update && apt-get install -y chromium)

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q $(TORCH)
	$(PY) -m pip install -q -e ".[$(EXTRAS)]"
	touch $@

run: setup
	$(VENV)/bin/cafe run

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

test: lint chromium
	HF_HUB_OFFLINE=1 $(PY) -m pytest
