#!/usr/bin/env bash
# One prepared run on a borrowed GPU machine (16 cores, one GPU, no network, hpsearch not
# installed): the Tier B table on the CPUs, then the built-in objective and bench/gpu.py on the
# GPU. Run from the checkout's root with the Fashion-MNIST files in .devdata/fashion-mnist/:
#   OUT=/some/folder bash bench/device_run.sh
set -uo pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
: "${OUT:?set OUT}"
echo "cores $(nproc); $(grep -m1 'model name' /proc/cpuinfo)"
python3 -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'no cuda')"
start=$(date +%s)
timeout "${TIER_B_TIMEOUT:-400}" python3 bench/tier_b_table.py --n "${TIER_B_N:-640}" --m "${TIER_B_M:-64}" \
    --data-root .devdata --out "$OUT/tier_b" --limit-s "${TIER_B_LIMIT:-280}" --jobs "$(nproc)" > "$OUT/tier_b.log" 2>&1
echo "tier_b rc=$? after $(( $(date +%s) - start )) s"; tail -n 2 "$OUT/tier_b.log" | cut -c1-400
timeout 150 python3 bench/gpu_objective.py --data-root .devdata --out "$OUT" > "$OUT/gpu_objective.log" 2>&1
echo "gpu_objective rc=$?"; cat "$OUT/gpu_objective.log" | tail -n 8
timeout 120 python3 bench/gpu.py --compile off --out "$OUT" > "$OUT/gpu.log" 2>&1
echo "gpu rc=$? after $(( $(date +%s) - start )) s"; tail -n 16 "$OUT/gpu.log"
