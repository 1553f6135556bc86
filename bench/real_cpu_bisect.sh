#!/usr/bin/env bash
# The real tier's CPU regression, by hand (#40): torch 2.13.0's CPU build, a training step of
# real matmuls (tests/test_real_bisect.py's TRAIN), its known-good speed taken with the lock,
# then a package added, a comment edited, CUDA_VISIBLE_DEVICES and OMP_NUM_THREADS=1 set, and
# `envguard bisect` with no command, at 80 columns. From the repository root:
#   HOUSE=DIR bash bench/real_cpu_bisect.sh OUT
# HOUSE holds torch==2.13.0+cpu and its dependencies (pip download --dest DIR
# torch==2.13.0+cpu). Everything else lives in a temporary folder with a HOME of its own.
set -euo pipefail
OUT=$1; REPO=$PWD; HOUSE=${HOUSE:?a folder with torch==2.13.0+cpu and its dependencies}
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
export HOME=$W/home ENVGUARD_CACHE_DIR=$W/eg TORCHINDUCTOR_CACHE_DIR=$W/inductor COLUMNS=80
export GIT_AUTHOR_NAME=bench GIT_AUTHOR_EMAIL=bench@localhost GIT_COMMITTER_NAME=bench
export GIT_COMMITTER_EMAIL=bench@localhost
unset OMP_NUM_THREADS CUDA_VISIBLE_DEVICES VIRTUAL_ENV
mkdir -p "$HOME" "$OUT" "$W/train"
EG=${EG:-$REPO/.venv/bin/envguard}; UV=${UV:-$REPO/.venv/bin/uv}
"$REPO/.venv/bin/python" - "$W" <<'PY'
import sys
from pathlib import Path
from envguard.demo.wheels import build_wheel
sys.path.insert(0, ".")
from tests.test_real_bisect import TRAIN
Path(sys.argv[1], "train", "train.py").write_text(TRAIN)
build_wheel(Path(sys.argv[1], "extra"), "helper", "1.0")
PY
cd "$W/train"; git init -q -b main; printf '.venv/\n' > .gitignore; git add -A; git commit -qm init
"$UV" venv -q .venv
"$UV" pip install -q --python .venv --offline --find-links "$HOUSE" torch==2.13.0+cpu
METRIC=(--metric 'throughput: ([0-9.]+)' --higher-is-better --unit GFLOP/s)
"$EG" snapshot --color never --bench "${METRIC[@]}" -- python train.py | tee "$OUT/snapshot.txt"
git add lockfiles; git commit -qm "the known-good lock"
"$UV" pip install -q --python .venv --offline --find-links "$W/extra" helper==1.0
sed -i 's/# a training/# one training/' train.py
export CUDA_VISIBLE_DEVICES=0 OMP_NUM_THREADS=1
start=$(date +%s)
"$EG" bisect --color never --find-links "$HOUSE" --find-links "$W/extra" --offline \
  | tee "$OUT/bisect.txt" || true
echo "bisect: $(( $(date +%s) - start )) s wall" | tee -a "$OUT/bisect.txt"
