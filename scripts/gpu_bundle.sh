#!/usr/bin/env bash
# Packs this machine's build for a GPU machine (the device tool): stripped binaries, the CTest
# files and the shared libraries beyond torch that ampt loads, into .gpu/ (git-ignored; name it in
# the device tool's `carry`). scripts/gpu_session.sh unpacks and runs it there.
#   scripts/gpu_bundle.sh [BUILD_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
out=$root/.gpu
rm -rf "$out"
mkdir -p "$out/lib"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
# CTest files and the test binaries hold absolute paths (sources, build): the session links this
# root's path to its own checkout, so the bundle keeps the build's layout relative to the root.
rel=${build#"$root"/}
(cd "$build" && find . -name '*.cmake' -not -path '*/CMakeFiles/*' -print0 |
  xargs -0 cp --parents -t "$stage") 
for bin in ampt ampt_tokenize_bench tests/ampt_core_tests tests/ampt_torch_tests tests/ampt_slurm_tests \
           tests/ampt_skip_probe; do
  [[ -f $build/$bin ]] || continue
  mkdir -p "$stage/$(dirname "$bin")"
  strip -o "$stage/$bin" "$build/$bin"
done
tar -C "$stage" -czf "$out/build.tar.gz" .
for lib in $(ldd "$build/ampt" | awk '/=> \// {print $3}' | grep -E 'libfmt|libyaml-cpp|libcudart|libtcmalloc'); do
  cp -L "$lib" "$out/lib/"
done
# Arrow and Parquet (the pyarrow wheel's, which the GPU image need not have): 62 MB as they are,
# so compressed, and unpacked into .gpu/lib by gpu_session.sh.
arrow_libs=$(ldd "$build/ampt" | awk '/=> \// {print $3}' | grep -E 'libarrow|libparquet')
tar -czhf "$out/arrow-libs.tar.gz" -C / $(printf '%s\n' $arrow_libs | sed 's|^/||')
printf '%s\n%s\n' "$root" "$rel" > "$out/origin"
du -sh "$out"
