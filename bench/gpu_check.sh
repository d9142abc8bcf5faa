#!/usr/bin/env bash
# The GPU check: `hpsearch run spaces/resnet.yaml` and the GPU paths around it (packing, the
# out-of-memory retry, AMP, compile, export -> train, bench.gpu), one step per process, each
# under its own timeout, in about 8 minutes on one H100-class GPU. Steps: bench/gpu_check.py.
# Writes OUT/gpu_check.json, OUT/gpu_packing.json, OUT/gpu.json and OUT/gpu_check_logs.tar.gz
# (one log per step): 4 files, as a lent machine returns at most 8.
#
#   OUT=/tmp/check bash bench/gpu_check.sh --smoke   # CPU, a fake GPU, tiny sizes: CI (under 2 minutes)
#   bash bench/gpu_check.sh --prepare                # here, once: what the GPU machine lacks, as wheels in .whl/
#
# A lent GPU machine (the device tool) has no network and a python3 with torch but no optuna or
# pydantic, so run --prepare here first, then make this the session's first device call:
#   run(command="OUT=$OUT bash bench/gpu_check.sh", carry=[".whl"], timeout_s=540)
# then copy its gpu_check.json, gpu_packing.json and gpu.json into bench/results/ and run
# `.venv/bin/python -m bench.run_all --render-only` (docs/scaling.md, "What has run on a GPU").
set -uo pipefail
cd "$(dirname "$0")/.."
WHEELS="optuna sqlalchemy alembic mako colorlog pydantic pydantic-core annotated-types typing-inspection typing-extensions"
py=${PYTHON:-python3}
[[ -x .venv/bin/python && -z ${PYTHON:-} ]] && py=.venv/bin/python

if [[ ${1:-} == --prepare ]]; then  # the versions this checkout's .venv runs, built for the machine's Python 3.12
    mkdir -p .git/info && { grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo /.whl/ >>.git/info/exclude; }
    pins=$("$py" -c "import importlib.metadata as m, sys; print(' '.join(f'{n}=={m.version(n)}' for n in sys.argv[1:]))" $WHEELS) || exit 1
    exec "$py" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl $pins
fi
: "${OUT:?set OUT to the folder for the results}"
smoke=() deadline=${GPU_CHECK_S:-440} limits=(120 150 90 60 150 60 120)  # seconds: all steps, then each step
if [[ ${1:-} == --smoke ]]; then
    smoke=(--smoke) deadline=240 limits=(60 75 30 45 30 45 45)  # a guard for a loaded machine: about 1.5 minutes on 2 cores
fi
if [[ -d .whl ]] && ! "$py" -c "import optuna, pydantic" 2>/dev/null; then
    "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/gpu_check_site .whl/*.whl || exit 1
    export PYTHONPATH=/tmp/gpu_check_site
fi
export PYTHONUNBUFFERED=1
if [[ -z ${smoke[*]} ]] && ! "$py" -c "import sys, torch; sys.exit(not torch.cuda.is_available())"; then
    echo "bench/gpu_check.sh: no CUDA device; run it on a GPU machine, or with --smoke on CPU" >&2
    exit 1
fi
work=$(mktemp -d /tmp/gpu_check.XXXXXX)
mkdir -p "$work/logs" "$OUT"
start=$SECONDS
for n in 1 2 3 4 5 6 7; do
    limit=${limits[n - 1]} left=$((deadline - (SECONDS - start)))
    ((limit > left)) && limit=$left
    if ((limit < 10)); then
        echo "step $n: skipped, no time left"
        continue
    fi
    t0=$SECONDS
    timeout -k 10 "$limit" "$py" -m bench.gpu_check --step "$n" "${smoke[@]}" --work "$work" --out "$OUT" >"$work/logs/step$n.log" 2>&1
    rc=$?
    echo "$rc $((SECONDS - t0)) $limit" >"$work/step$n.rc"
    echo "step $n: exit $rc after $((SECONDS - t0)) s (limit $limit s)"
done
"$py" -m bench.gpu_check --collect "${smoke[@]}" --work "$work" --out "$OUT"
rc=$?
tar czf "$OUT/gpu_check_logs.tar.gz" -C "$work" logs && rm -rf "$work"
echo "gpu_check: $((SECONDS - start)) s in all"
exit $rc
