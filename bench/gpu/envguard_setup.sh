# Sourced by the device scripts (bisect_h200.sh, tf32_bisect.sh): envguard installed from
# .whl into a venv of its own under $W, on the interpreter of the machine's torch venv.
# Needs REPO (the repository root, .whl inside) and W (an empty work folder); sets
# TORCH_VENV, BASE (its interpreter), SITE (its site-packages, where torch is), UV and EG,
# and points uv's cache into $W.
TORCH_VENV=${TORCH_VENV:-/opt/torch/.venv}
if [ ! -x "$TORCH_VENV/bin/python3" ]; then  # the image's plain python3 holds torch
  TORCH_VENV=$(python3 -c 'import sys; print(sys.prefix)')
fi
BASE=$("$TORCH_VENV/bin/python3" -c 'import os, sys; print(os.path.realpath(sys._base_executable))')
SITE=$("$TORCH_VENV/bin/python3" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
python3 -m pip install -q --no-index --no-deps --target "$W/uvsite" "$REPO"/.whl/uv-*.whl
UV="$W/uvsite/bin/uv"
export UV_CACHE_DIR="$W/uv-cache"
"$UV" venv -q "$W/egv" -p "$BASE"
"$UV" pip install -q --python "$W/egv/bin/python" --offline --no-index --find-links "$REPO/.whl" envguard-ml
EG="$W/egv/bin/envguard"
