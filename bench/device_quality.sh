#!/usr/bin/env bash
# The search-quality benchmark's many-seed runs on a borrowed 16-core machine (no network, no
# hpsearch install): Optuna, pydantic and their needs travel as wheels in .whl/, mf-prior-bench
# and ConfigSpace (pure Python) as copies in .devsite/, Fashion-MNIST's idx files in .devdata/.
# Run from the checkout's root:   OUT=/some/folder bash bench/device_quality.sh
#   1. Tier C: live Fashion-MNIST searches, 12 seeds x (Optuna's defaults, hpsearch), 72 epochs (~200 s)
#   2. the 500 paired seeds, hpsearch against Optuna's defaults, Tier A (~240 s) then Tier B (~130 s here,
#      17 minutes on 2 cores), at 72 and 288 epochs
#   3. the second attempt at the defaults: four variants on the calibration seeds 0-59
set -uo pipefail
: "${OUT:?set OUT}"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=$PWD:/tmp/site:$PWD/.devsite PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1 HPSEARCH_BENCH_DATA=$PWD/.devdata
python3 -c "import optuna, mfpbench, pydantic, sklearn, hpsearch.study.open; print('optuna', optuna.__version__)" || exit 1
j=$(python3 -c "import os; print(len(os.sched_getaffinity(0)))")
echo "cores $j; $(grep -m1 'model name' /proc/cpuinfo)"
start=$(date +%s); deadline=${DEADLINE:-900}
left() { echo $(( deadline - ($(date +%s) - start) )); }
step() {  # step NAME SECONDS ARGS...: one search_quality.py run, cut at SECONDS
    local name=$1 t=$2; shift 2
    (( t > $(left) )) && t=$(left)
    (( t < 20 )) && { echo "$name: skipped, $(left) s left"; return; }
    timeout "$t" python3 bench/search_quality.py "$@" --jobs "$j" --json "$OUT/$name.json" 2>&1 | grep -v " searches, "
    echo "$name after $(( $(date +%s) - start )) s"
}
step search_quality_tier_c 230 --tier live --methods optuna_default hpsearch --seeds 200:212 --budget 72 --plot "$OUT/search_quality_tier_c.png"
step search_quality_paired_synthetic 260 --tier synthetic --methods optuna_default hpsearch --seeds 200:700 --budget 72 288
step search_quality_paired_table 300 --tier table --methods optuna_default hpsearch --seeds 200:700 --budget 72 288
step search_quality_attempt2 120 --tier synthetic --methods optuna_default hpsearch tpe_ei64 tpe_univariate tpe_sh_min2 tpe_hb_rf2 --seeds 0:60 --budget 72 288
echo "done after $(( $(date +%s) - start )) s"
