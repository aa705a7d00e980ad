#!/usr/bin/env bash
# Run HERE (the CPU machine, in the repo root) before the device call: downloads, into .whl/
# (git-ignored through .git/info/exclude), the Python 3.12 wheels the device image lacks for
# perf/gpu_check.sh (its image has torch, accelerate, peft, pyarrow, scipy, ... but no trl,
# datasets, soundfile, jsonschema, and transformers 5.17). About 20 MB; carry .whl in the call.
# vLLM itself cannot travel (its wheel is several hundred MB; the call carries 64 MiB at most
# and the device reaches no registry): where the image has no vLLM, gpu_check.sh says so and
# measures the transformers side only.
set -euo pipefail
exclude="$(git rev-parse --git-common-dir)/info/exclude"
grep -qx '/.whl/' "$exclude" 2>/dev/null || echo '/.whl/' >> "$exclude"
mkdir -p .whl
plat=(--platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64
      --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform any)
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp "${plat[@]}" -d .whl \
  trl==1.16.0 transformers==5.24.0 datasets dill multiprocess soundfile \
  jsonschema jsonschema-specifications referencing rpds-py
du -sh .whl
