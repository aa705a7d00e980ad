#!/usr/bin/env bash
# The GPU figures of issue 12 in one call (about 8 minutes on one H200). On the device machine:
#   bash perf/gpu_check.sh            (carry .whl from perf/gpu_wheels.sh if the image lacks trl)
# Prints: harness vs raw vLLM (goal >= 90%), vLLM vs transformers (goal >= 20x) from
# perf/gpu_throughput.py (Omni-7B-shaped, 30 s unique clips, 512 tokens, processor cache off,
# ABBA passes), and one GRPO step's time with vLLM colocate rollouts on dummy weights plus
# whether rewards were non-zero, from perf/grpo_gpu.py. Each part has its own time limit so
# one stuck part cannot eat the other's; the RESULT lines carry every number as JSON.
set -u
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export PYTHONPATH="$PWD"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl && export PYTHONPATH="$PWD:/tmp/site"
fi
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"
skip=()
if python3 -c "import vllm; print('vllm', vllm.__version__)"; then :; else
  echo "NOT MEASURED: vLLM is not installed on this machine, so harness/raw and vLLM/transformers"
  echo "cannot be taken here; the transformers side and GRPO with transformers rollouts still run."
  skip=(--skip-vllm)
fi
python3 -c "import trl; print('trl', trl.__version__)" || echo "trl missing: run perf/gpu_wheels.sh here and carry .whl"
echo "== throughput (perf/gpu_throughput.py) =="
timeout 330 python3 perf/gpu_throughput.py --items 128 --tf-items 32 --work /tmp/cafe-gpu-perf "${skip[@]}"
echo "throughput exit $?"
echo "== GRPO (perf/grpo_gpu.py) =="
timeout 150 python3 perf/grpo_gpu.py --steps 2 --completion 64 "${skip[@]}"
echo "grpo exit $?"
