#!/usr/bin/env bash
# One prepared calibration run for a GPU node (written for an H200 node).
#
#   OUT=/some/folder calibration/run_on_gpu.sh
#
# 1. makes `libra_des` importable with what `pip install -c constraints.txt -e .[calibrate]`
#    gives and nothing else: a node whose python already has a CUDA torch keeps it (the
#    calibrate extra would replace it), and wheels in ./.whl are used offline when present;
# 2. measures with `libra-des calibrate --quick` (all visible GPUs for the collectives, every
#    group size from 2 to all of them, interference), fits and cross-validates;
# 3. replays the profile with `libra-des validate` and prints its table;
# 4. leaves in $OUT: profile.json, validation.html, validate.json, validate.txt, harness.log.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${OUT:?set OUT to the folder that receives the profile and the report}"
mkdir -p "$OUT"
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1

if ! "$PY" -c "import libra_des" 2>/dev/null; then
    extra=".[calibrate]"
    if "$PY" -c "import torch, sys; sys.exit(not torch.cuda.is_available())" 2>/dev/null; then
        extra="."  # keep the node's CUDA build of torch
    fi
    if [ -d .whl ]; then
        "$PY" -m pip install -q --no-index --find-links .whl -c constraints.txt -e "$extra"
    else
        "$PY" -m pip install -q -c constraints.txt -e "$extra"
    fi
fi
"$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, \
'gpus', torch.cuda.device_count())"

# The limit only guards against a hung rank (--quick aims at under 10 minutes on 8 GPUs).
timeout 900 "$PY" -m libra_des.cli calibrate --device cuda --quick --out "$OUT" 2>&1 \
    | tee "$OUT/harness.log"
"$PY" -m libra_des.cli validate "$OUT/profile.json" --json >"$OUT/validate.json"
"$PY" -m libra_des.cli validate "$OUT/profile.json" | tee "$OUT/validate.txt"
