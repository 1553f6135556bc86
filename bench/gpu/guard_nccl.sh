#!/usr/bin/env bash
# envguard.guard(ranks=True) under torchrun with NCCL on two real GPUs (nvidia-h200-x2).
# usage: bash bench/gpu/guard_nccl.sh VENV OUT   (the repo's root as the working directory)
set -u
V=$1; OUT=$2; REPO=$(pwd)
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
PY="$V/bin/python"
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
"$PY" -c "import torch; print('torch', torch.__version__, 'GPUs', torch.cuda.device_count())"
# the lock is taken in a plain shell, as a user would, not under the launcher
(cd /tmp && "$PY" -m envguard snapshot --venv "$V" -q -o "$OUT/guard.envguard.toml")
run() {  # name, then guard_worker.py's arguments after LOCK
  local name=$1; shift
  echo "=== $name"
  (cd /tmp && timeout 300 "$PY" -m torch.distributed.run --nproc_per_node=2 \
    --master_port=$((29500 + RANDOM % 1000)) "$REPO/bench/gpu/guard_worker.py" \
    "$OUT/guard.envguard.toml" "$@" 2>"$OUT/$name.stderr" | sort)
  echo "exit ${PIPESTATUS[0]}; stderr tail:"; tail -n 3 "$OUT/$name.stderr" | cut -c1-240
}
run nccl-clean-set-device nccl 1 0
run nccl-clean-no-set-device nccl 0 0
run nccl-drift-set-device nccl 1 1
run nccl-drift-no-set-device nccl 0 1
run gloo-drift gloo 0 1
run old-way-default-group-no-set-device nccl 0 0 default-group
