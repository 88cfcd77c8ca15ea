#!/usr/bin/env bash
# Installs what building ampt needs and skips what is already there; safe to run any number of
# times. On failure it prints one line naming what it could not get and exits non-zero.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
torch_version="2.11.0"
debian_packages=(cmake g++ ninja-build ccache git libyaml-cpp-dev libcxxopts-dev libfmt-dev catch2 libgloo-dev)

fail() { echo "bootstrap: error: $*" >&2; exit 1; }
note() { echo "bootstrap: $*"; }

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"
  elif command -v sudo >/dev/null 2>&1; then sudo "$@"
  else return 1
  fi
}

missing=()
for pkg in "${debian_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ "${#missing[@]}" -gt 0 ]; then
  note "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  as_root apt-get update -qq >/dev/null 2>&1 || fail "apt-get update failed (root or sudo needed to install ${missing[*]})"
  as_root apt-get install -y -qq "${missing[@]}" >/dev/null 2>&1 || fail "could not install Debian packages: ${missing[*]}"
fi

cuda_home="${CUDA_HOME:-/usr/local/cuda}"
[ -x "$cuda_home/bin/nvcc" ] || fail "CUDA toolkit not found at $cuda_home (LibTorch's CMake config needs CUDA 13; set CUDA_HOME)"

venv="$root/.venv"
if "$venv/bin/python" -c "import torch, numpy, safetensors, tensorboard, sys; sys.exit(torch.__version__.split('+')[0] != '$torch_version')" >/dev/null 2>&1; then
  :
else
  python="$(command -v python3 || true)"
  [ -n "$python" ] || fail "python3 not found (needed for the torch==$torch_version virtualenv)"
  if [ ! -x "$venv/bin/python" ]; then
    note "creating virtualenv $venv"
    "$python" -m venv "$venv" >/dev/null 2>&1 || fail "could not create a virtualenv with $python (install python3-venv)"
  fi
  note "installing torch==$torch_version, numpy, safetensors and tensorboard into $venv (a few GB, once)"
  "$venv/bin/python" -m pip install -q "torch==$torch_version" numpy safetensors tensorboard >/dev/null 2>&1 \
    || fail "could not install torch==$torch_version from PyPI into $venv"
fi
