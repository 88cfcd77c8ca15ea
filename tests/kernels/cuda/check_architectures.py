"""Checks with cuobjdump that a static library of CUDA kernels holds exactly the binaries (SASS)
and PTX the build asked for: what a GPU of each generation finds to run.

usage: check_architectures.py CUOBJDUMP LIBRARY BINARIES PTX
  BINARIES: comma-separated compute capabilities (75,80,86), PTX: one (120)
"""

import re
import subprocess
import sys


def listed(cuobjdump, library, kind):
    """The sm_XY names of the `kind` ("elf" or "ptx") files in the library."""
    result = subprocess.run([cuobjdump, f"--list-{kind}", library], capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"{cuobjdump} --list-{kind} {library} failed: {result.stderr.strip()}")
    return sorted({int(m) for m in re.findall(r"\.sm_(\d+)a?\.(?:cubin|ptx)", result.stdout)}), result.stdout


def main(argv):
    if len(argv) != 5:
        sys.exit(__doc__.strip().splitlines()[-2])
    cuobjdump, library, binaries, ptx = argv[1:]
    want_elf = sorted(int(b) for b in binaries.split(","))
    want_ptx = [int(ptx)]
    elf, elf_text = listed(cuobjdump, library, "elf")
    ptxs, ptx_text = listed(cuobjdump, library, "ptx")
    print(elf_text + ptx_text)
    failed = False
    if elf != want_elf:
        print(f"{library}: binaries for {elf}, expected {want_elf}")
        failed = True
    if ptxs != want_ptx:
        print(f"{library}: PTX for {ptxs}, expected {want_ptx}")
        failed = True
    if not failed:
        print(f"{library}: binaries for sm_{', sm_'.join(map(str, elf))} and compute_{ptx} PTX")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
