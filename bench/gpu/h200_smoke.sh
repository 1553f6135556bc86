#!/usr/bin/env bash
# On the H200, after bench/cuda_check.py: the rest of envguard against the real CUDA venv.
# usage: bash bench/gpu/h200_smoke.sh VENV OUT
set -u
V=$1; OUT=$2; cd /tmp
envguard snapshot --venv "$V" -q -o "$OUT/smoke.envguard.toml" --no-default-caches
echo "--- diff against itself (expect exit 0)"; envguard diff "$OUT/smoke.envguard.toml" --venv "$V" -q 2>/dev/null; envguard diff "$OUT/smoke.envguard.toml" --venv "$V" | head -3; echo "exit $?"
echo "--- preflight of a no-op pip install (expect exit 0)"
envguard preflight --venv "$V" -- pip install --no-index torch==2.11.0; echo "exit $?"
echo "--- restore --dry-run (no network here; plan only)"
envguard restore "$OUT/smoke.envguard.toml" --dry-run --json | python3 -c "import json,sys; d=json.load(sys.stdin)['result']['plan']; print(d['indexes']); print([p for p in d['pins'] if p['name'].startswith(('torch','triton','nvidia-cudnn'))])"
echo "--- fleet of two copies (expect exit 0)"
mkdir -p "$OUT/fleet"; cp "$OUT/smoke.envguard.toml" "$OUT/fleet/a.envguard.toml"
envguard fleet "$OUT/smoke.envguard.toml" "$OUT/fleet"; echo "exit $?"
echo "--- envguard.guard in-process with the real torch venv"
"$V/bin/python" - "$OUT/smoke.envguard.toml" "$V" <<'PY'
import sys, time
sys.path.insert(0, "/tmp/egsite")
t = time.perf_counter()
import envguard
report = envguard.guard(sys.argv[1], venv=sys.argv[2])
print(f"guard ok in {time.perf_counter() - t:.2f} s, {len(report.changes)} changes, torch imported: {'torch' in sys.modules}")
PY
