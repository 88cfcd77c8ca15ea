#!/usr/bin/env bash
# Runs on the GPU machine (the device tool, in the checkout's copy, with .gpu carried): unpacks
# scripts/gpu_bundle.sh's build where its absolute paths expect it, points the venv at the image's
# torch (/opt/torch/.venv, torch 2.11.0+cu130) and runs what is asked, writing into $OUT.
#   scripts/gpu_session.sh tests    # ampt doctor, the CUDA-tagged tests, then the whole suite (ctest -j8)
#   scripts/gpu_session.sh bench [RUN.PY ARGS]  # benchmarks/run.py's GPU plan, within 480 s
#   scripts/gpu_session.sh ARGS...  # any command, after the set-up (e.g. build/ampt train ...,
#                                   # timeout 540 .venv/bin/python benchmarks/fp8_loss.py,
#                                   # timeout 540 .venv/bin/python benchmarks/qlora_speed.py,
#                                   # timeout 540 .venv/bin/python benchmarks/preference_speed.py
#                                   #   --device cuda --layers 8 --hidden 1024 --intermediate 2816
#                                   #   --heads 16 --kv_heads 4 --batch 8 --max_length 512,
#                                   # timeout 540 .venv/bin/python benchmarks/moe_speed.py
#                                   #   --device cuda --precision bf16 --layers 8 --hidden 1024
#                                   #   --experts 64 --expert_width 512 --top_k 8 --batch 8 --block 1024,
#                                   # timeout 540 .venv/bin/python benchmarks/grpo_speed.py
#                                   #   --device cuda --precision bf16 --layers 8 --hidden 1024
#                                   #   --intermediate 3072 --heads 16 --kv_heads 8 --generations 8
#                                   #   --batch 32 --grad_accum 2 --max_completion_length 256
#                                   #   --steps 6 --warmup 2 --repeats 2; it rewrites its results
#                                   #   file after every run, so a cut leaves the runs it finished)
set -uo pipefail
here=$(pwd)
origin=$(sed -n 1p .gpu/origin)
rel=$(sed -n 2p .gpu/origin)
if [[ $origin != "$here" ]]; then
  mkdir -p "$(dirname "$origin")"
  ln -sfn "$here" "$origin"
fi
mkdir -p "$here/$rel"
tar -C "$here/$rel" -xzf .gpu/build.tar.gz
[[ -f .gpu/arrow-libs.tar.gz ]] && tar -C .gpu/lib -xzf .gpu/arrow-libs.tar.gz --transform 's|.*/||'
[[ -e .venv ]] || ln -s /opt/torch/.venv .venv
torch_lib=$(/opt/torch/.venv/bin/python -c 'import torch, os; print(os.path.dirname(torch.__file__) + "/lib")')
# ampt links the wheel's libcublasLt (kernels/gemm_epilogues): the image's copy, beside torch.
cublaslt_lib=$(dirname "$(find "$torch_lib/../.." -path '*/nvidia/*' -name 'libcublasLt.so.*' | head -n 1)")
export LD_LIBRARY_PATH=$torch_lib:$cublaslt_lib:$here/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
OUT=${OUT:-$here/gpu_out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT/gpu.txt" 2>&1
cd "$origin"
case "${1:-}" in
  tests)
    # What this GPU runs and why, with the self-checks (benchmarks/results records it).
    "$rel/ampt" doctor > "$OUT/doctor.txt" 2>&1
    "$rel/tests/ampt_torch_tests" "[cuda],[fp8],[cuda_graphs]" 2>&1 | tail -n 200 > "$OUT/cuda_tests.txt"
    (cd "$rel" && timeout 420 ctest -j8 --timeout 300 --output-on-failure) > "$OUT/ctest.txt" 2>&1
    tail -n 40 "$OUT/ctest.txt"
    ;;
  bench)
    # Under the device's 10-minute limit with room to copy: run.py writes its results file after
    # every case, so a plan cut short still brings back what it measured. Further arguments go
    # to run.py (e.g. --models gpt2-124m gpt2-350m, to split the plan over two calls).
    timeout "${BENCH_SECONDS:-480}" .venv/bin/python benchmarks/run.py --device cuda "${@:2}" 2>&1 |
      tee "$OUT/bench.txt" | tail -n 60
    ;;
  *)
    "$@"
    ;;
esac
# Whatever results files the command wrote (run.py, fp8_loss.py, op_profile.py) come back.
find benchmarks/results -type f -newer "$here/.gpu/origin" -exec cp {} "$OUT/" \;
