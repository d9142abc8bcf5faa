#!/usr/bin/env bash
# The search-quality benchmark's fresh-seed runs on a borrowed 16-core machine (no network, no
# hpsearch install): Optuna, pydantic and their needs travel as wheels in .whl/, mf-prior-bench
# and ConfigSpace (pure Python) as copies in .devsite/. Run from the checkout's root:
#   OUT=/some/folder bash bench/device_quality.sh
set -uo pipefail
: "${OUT:?set OUT}"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=$PWD:/tmp/site:$PWD/.devsite PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
python3 -c "import optuna, mfpbench, pydantic, hpsearch.study.open; print('optuna', optuna.__version__)" || exit 1
echo "cores $(python3 -c "import os; print(len(os.sched_getaffinity(0)))"); $(grep -m1 'model name' /proc/cpuinfo)"
j=$(python3 -c "import os; print(len(os.sched_getaffinity(0)))"); start=$(date +%s); deadline=${DEADLINE:-380}
left() { echo $(( deadline - ($(date +%s) - start) )); }
methods="random sobol optuna_default tpe_hyperband hpsearch"
t=$(left); (( t > 230 )) && t=230
timeout "$t" python3 bench/search_quality.py --tier synthetic --methods $methods --seeds 200:400 --budget 72 144 288 --jobs "$j" \
    --json "$OUT/search_quality_synthetic.json" --plot "$OUT/search_quality_synthetic.png" 2>&1 | grep -v searches
echo "synthetic after $(( $(date +%s) - start )) s"
t=$(left); (( t > 100 )) && t=100
timeout "$t" python3 bench/search_quality.py --tier table --methods $methods --seeds 200:400 --budget 72 144 288 --jobs "$j" \
    --json "$OUT/search_quality_table.json" --plot "$OUT/search_quality_table.png" 2>&1 | grep -v searches
echo "table after $(( $(date +%s) - start )) s"
t=$(left)
if (( t > 60 )); then
    timeout "$t" python3 bench/search_quality.py --tier synthetic --methods optuna_default hpsearch --seeds 200:700 --budget 72 288 --jobs "$j" \
        --json "$OUT/search_quality_paired.json" 2>&1 | grep -v searches
fi
echo "done after $(( $(date +%s) - start )) s"
