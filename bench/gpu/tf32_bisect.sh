#!/usr/bin/env bash
# envguard bisect on the GPU (#40 part 6): a steady-state fp32 training step with TF32
# allowed, its known-good speed taken with the lock (snapshot --bench), then five drifted
# facts of which one, NVIDIA_TF32_OVERRIDE=0, costs the throughput; `envguard bisect` with
# no command runs the lock's benchmark and must name it. Then bench/cache_warmth.py on the
# GPU: a copied Inductor cache against the same cache in place.
#
# From the repository root on the device (no network there), with .whl holding uv, envguard's
# dependencies and envguard's own wheel:
#   bash bench/gpu/tf32_bisect.sh OUT
# The machine has torch in /opt/torch/.venv and no wheel of it, so the training venv is a uv
# venv that reaches that torch through PYTHONPATH, the same on both sides.
set -euo pipefail
OUT=$1; REPO=$PWD; W=/tmp/egw; P=/tmp/proj
rm -rf "$W" "$P" ~/.cache/envguard; mkdir -p "$W" "$P"
# shellcheck source=bench/gpu/envguard_setup.sh
. "$REPO/bench/gpu/envguard_setup.sh"
{ "$EG" --version; "$UV" --version; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  echo "base python: $BASE; torch from: $SITE"; } | tee "$OUT/machine.txt"

cd "$P"; git init -q -b main; cp "$REPO/bench/gpu/tf32_step.py" bench.py
printf '.venv/\n' > .gitignore
git add -A; git -c user.name=bench -c user.email=bench@localhost commit -qm "known good"
"$UV" venv -q .venv -p "$BASE"
export PYTHONPATH="$SITE" TORCHINDUCTOR_CACHE_DIR="$W/inductor"
METRIC=(--metric 'throughput: ([0-9.]+)' --higher-is-better --unit Ksamples/s)
echo "--- the known-good speed, with the lock"
COLUMNS=80 "$EG" snapshot --venv .venv --bench "${METRIC[@]}" -- python bench.py \
  | tee "$OUT/snapshot.txt"
git add lockfiles/*.envguard.toml; git -c user.name=bench -c user.email=bench@localhost commit -qm "lock"

# the drift: a package, a patch, three variables (one of which costs the throughput)
"$UV" pip install -q --python .venv/bin/python --offline --no-index --find-links "$REPO/.whl" tomli_w
echo "# THREAD SAFETY FIX" >> bench.py
export NCCL_DEBUG=WARN CUDA_DEVICE_MAX_CONNECTIONS=1 NVIDIA_TF32_OVERRIDE=0
echo "--- by hand: BAD $(.venv/bin/python bench.py)"
COLUMNS=80 "$EG" diff --color never > "$OUT/diff.txt" 2>&1 || true
cat "$OUT/diff.txt"
echo "--- bisect, no command: the lock's benchmark"
start=$(date +%s)
COLUMNS=80 "$EG" bisect --find-links "$REPO/.whl" --offline --color never 2>&1 \
  | tee "$OUT/bisect.txt" || true
echo "bisect: $(( $(date +%s) - start )) s wall" | tee -a "$OUT/bisect.txt"
echo "--- left behind: $(ls ~/.cache/envguard/bisect 2>/dev/null | wc -l) work folders; $(( $(git worktree list | wc -l) - 1 )) extra worktree(s); $(git stash list | wc -l) stash(es)"
git status --short
unset NVIDIA_TF32_OVERRIDE NCCL_DEBUG CUDA_DEVICE_MAX_CONNECTIONS
echo "--- a copied Inductor cache on the GPU"
cd "$REPO"
timeout 240 "$TORCH_VENV/bin/python3" bench/cache_warmth.py --python "$TORCH_VENV/bin/python3" \
  --device cuda --runs 3 --json "$OUT/cache-warmth-gpu.json" | tee "$OUT/cache-warmth-gpu.txt" || echo "warmth: exit $?"
