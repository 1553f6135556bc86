#!/usr/bin/env bash
# envguard bisect on the H200 (#21): the incident's one GPU-bound culprit, the deleted Inductor
# cache, found among four drifted facts by trials of a real torch.compile first step.
#
# From the repository root on the device (no network there), with .whl holding uv, envguard's
# dependencies and envguard's own wheel (pip wheel --no-deps . -w .whl):
#   bash bench/gpu/bisect_h200.sh OUT
# The machine has torch 2.11.0+cu130 in /opt/torch/.venv and no wheel of it, so the training
# venv is a uv venv that reaches that torch through PYTHONPATH, the same on both sides: the
# venv moves are tested offline with built wheels (tests/test_bisect*.py, bench/bench_bisect.py);
# what is under test here is the cache, the patch, a variable and one added package.
set -euo pipefail
OUT=$1; REPO=$PWD; W=/tmp/egw; P=/tmp/proj; CACHE=/tmp/proj-cache
BENCH=${BENCH:-$REPO/bench/gpu/compile_step.py}
rm -rf "$W" "$P" "$CACHE" ~/.cache/envguard ~/.triton; mkdir -p "$W" "$P"
# shellcheck source=bench/gpu/envguard_setup.sh
. "$REPO/bench/gpu/envguard_setup.sh"
"$EG" --version; "$UV" --version; echo "base python: $BASE; torch from: $SITE"

# the project as the team has it: a repo, its venv, the lock committed, the cache warm
cd "$P"; git init -q -b main; cp "$BENCH" bench.py
printf '.venv/\n' > .gitignore
git add -A; git -c user.name=bench -c user.email=bench@localhost commit -qm "known good"
"$UV" venv -q .venv -p "$BASE"
export PYTHONPATH="$SITE" TORCHINDUCTOR_CACHE_DIR="$CACHE/inductor"
echo "--- the first run fills the cache, the second finds it"
TIMEFORMAT='%R s wall'
for i in 1 2; do time .venv/bin/python bench.py; done 2>&1 | tee "$OUT/warmup.txt"
"$EG" snapshot --venv .venv --save-cache | tee "$OUT/snapshot.txt"
git add lockfiles/*.envguard.toml; git -c user.name=bench -c user.email=bench@localhost commit -qm "lock"

# the incident: the cache "cleaned up", a package added, a patch left, a variable set
rm -rf "$CACHE"
"$UV" pip install -q --python .venv/bin/python --offline --no-index --find-links "$REPO/.whl" tomli_w
echo "# THREAD SAFETY FIX" >> bench.py
export NCCL_DEBUG=WARN
COLUMNS=80 "$EG" diff --color never > "$OUT/diff.txt" 2>&1 || true
cat "$OUT/diff.txt"

echo "--- bisect"
start=$(date +%s)
COLUMNS=80 "$EG" bisect --find-links "$REPO/.whl" --offline --metric 'first step ([0-9.]+) s' \
  --lower-is-better --unit 's first step' --color never -- python bench.py 2>&1 | tee "$OUT/bisect.txt"
echo "bisect: $(( $(date +%s) - start )) s wall" | tee -a "$OUT/bisect.txt"
echo "after it, $CACHE: $(test -e "$CACHE" && echo "exists" || echo "still gone")" | tee -a "$OUT/bisect.txt"
"$EG" bisect --find-links "$REPO/.whl" --offline --metric 'first step ([0-9.]+) s' \
  --lower-is-better --unit 's first step' --json -- python bench.py > "$OUT/bisect.json" || true
echo "--- left behind: $CACHE $(test -e "$CACHE" && echo "exists: $(find "$CACHE" -type f | wc -l) files" || echo "still gone"); $(ls ~/.cache/envguard/bisect 2>/dev/null | wc -l) work folders; $(( $(git worktree list | wc -l) - 1 )) extra worktree(s); $(git stash list | wc -l) stash(es)"
git status --short
