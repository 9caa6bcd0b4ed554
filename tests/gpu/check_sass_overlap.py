#!/usr/bin/env python3
"""Check in the SASS that kernel v2's softmax step runs beside the previous key tile's P~ V.

  check_sass_overlap.py --expect overlap OBJECT   every unguarded fwd_v2_kernel in OBJECT: in the key loop,
                                                  the exponentials precede the wait for P~ V
  check_sass_overlap.py --expect hoisted OBJECT   some fwd_v2_kernel has that wait above its exponentials
                                                  (the check's own control)
  ... OBJECT -- NVCC ARGS...                      compiles OBJECT first with that command

In the key loop the source issues S of tile i and P~ V of tile i - 1, waits for S (wgmma.wait_group 1),
runs tile i's softmax step, and only then waits for P~ V (wait_group 0). ptxas decides where that second
wait lands in the SASS, and twice put it where the softmax step waited for P~ V (fwd_v2_kernel.cuh
round_step says how): the kernel stays correct and only gets slower, so no other test sees it. Here, per
kernel: after the first `WARPGROUP.DEPBAR.LE gsb0, 0x1` (the loop's wait for S), the `MUFU.EX2` up to the
next `HGMMA` (the next step's S) are counted, and those before the next `WARPGROUP.DEPBAR.LE gsb0, 0x0`
(the wait for P~ V) must be at least 90 % of them.

cuobjdump comes from $CUOBJDUMP, beside nvcc (--nvcc), PATH, or --fetch DIR: the nvidia-cuda-cuobjdump and
nvidia-cuda-nvdisasm wheels from PyPI unpacked there (CUDA 13's toolkit packages may leave them out; cuobjdump
runs nvdisasm). Without them the check exits 77, which ctest reports as skipped.
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import zipfile

FUNCTION = re.compile(r"^\s*Function : (\S+)", re.M)
INSTRUCTION = re.compile(r"^\s+/\*[0-9a-f]{4,}\*/\s+([^;]*);", re.M)
SHARE = 0.9


def find_cuobjdump(nvcc, fetch_dir):
    candidates = [os.environ.get("CUOBJDUMP", "")]
    if nvcc:
        candidates.append(os.path.join(os.path.dirname(os.path.realpath(nvcc)), "cuobjdump"))
    candidates.append(shutil.which("cuobjdump") or "")
    if fetch_dir:
        candidates += glob.glob(os.path.join(fetch_dir, "nvidia", "*", "bin", "cuobjdump"))
    for c in candidates:
        if c and os.access(c, os.X_OK):
            return c
    if not fetch_dir:
        return None
    os.makedirs(fetch_dir, exist_ok=True)
    got = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                          "--platform", "manylinux2014_x86_64", "--platform", "manylinux_2_17_x86_64",
                          "-d", fetch_dir, "nvidia-cuda-cuobjdump>=13", "nvidia-cuda-nvdisasm>=13"],
                         capture_output=True, text=True)
    for wheel in glob.glob(os.path.join(fetch_dir, "nvidia_cuda_*.whl")):
        with zipfile.ZipFile(wheel) as z:
            z.extractall(fetch_dir)
    for c in glob.glob(os.path.join(fetch_dir, "nvidia", "*", "bin", "cuobjdump")):
        for tool in glob.glob(os.path.join(os.path.dirname(c), "*")):
            os.chmod(tool, 0o755)
        return c
    print(f"check_sass_overlap: no cuobjdump (pip download: {got.returncode} {got.stderr.strip()[-300:]})")
    return None


def loop_overlap(ops):
    """(exponentials before the wait for P~ V, exponentials of the step) in the first key loop, or None."""
    try:
        start = next(k for k, op in enumerate(ops) if op.startswith("WARPGROUP.DEPBAR.LE gsb0, 0x1"))
    except StopIteration:
        return None
    before, total, waited = 0, 0, False
    for op in ops[start + 1:]:
        if "HGMMA" in op:
            break
        if op.startswith("WARPGROUP.DEPBAR.LE gsb0, 0x0"):
            waited = True
        if "MUFU.EX2" in op:
            total += 1
            before += not waited
    return before, total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--expect", choices=["overlap", "hoisted"], required=True)
    ap.add_argument("--nvcc", default="")
    ap.add_argument("--fetch", default="", help="folder to fetch cuobjdump into when none is found")
    ap.add_argument("object")
    ap.add_argument("compile", nargs=argparse.REMAINDER, help="-- NVCC ARGS...: the command that makes OBJECT")
    a = ap.parse_args()
    command = a.compile[1:] if a.compile[:1] == ["--"] else a.compile
    if command:
        made = subprocess.run(command, capture_output=True, text=True)
        if made.returncode != 0:
            print(f"check_sass_overlap: compiling failed:\n{made.stderr}")
            return 1
    tool = find_cuobjdump(a.nvcc, a.fetch)
    if not tool:
        print("check_sass_overlap: SKIPPED: no cuobjdump to read the SASS with")
        return 77
    env = dict(os.environ, PATH=os.path.dirname(tool) + os.pathsep + os.environ.get("PATH", ""))  # its nvdisasm
    sass = subprocess.run([tool, "-sass", a.object], capture_output=True, text=True, env=env)
    if sass.returncode != 0:
        print(f"check_sass_overlap: {tool} -sass {a.object} failed: {sass.stderr.strip()}")
        return 1
    names = FUNCTION.findall(sass.stdout)
    bodies = FUNCTION.split(sass.stdout)[2::2]
    checked, hoisted = 0, []
    for name, body in zip(names, bodies):
        if "fwd_v2_kernel" not in name or "Lb0E" not in name:  # unguarded v2 kernels (Lb1E: the redo)
            continue
        result = loop_overlap([op.strip() for op in INSTRUCTION.findall(body)])
        if result is None or result[1] == 0:
            print(f"check_sass_overlap: no key loop found in {name}")
            return 1
        before, total = result
        checked += 1
        ok = before >= SHARE * total
        print(f"{'ok     ' if ok else 'HOISTED'} {before:3d} of {total:3d} exponentials before the wait for P~V: {name}")
        if not ok:
            hoisted.append(name)
    if checked == 0:
        print("check_sass_overlap: no unguarded fwd_v2_kernel in the object")
        return 1
    if a.expect == "overlap":
        if hoisted:
            print(f"check_sass_overlap: FAILED: {len(hoisted)} of {checked} kernels wait for P~V before their softmax step")
            return 1
        print(f"check_sass_overlap: {checked} kernels, each softmax step beside the previous P~V")
        return 0
    if not hoisted:
        print("check_sass_overlap: FAILED: the control's wait was not hoisted, so the check cannot tell")
        return 1
    print(f"check_sass_overlap: the control is caught ({len(hoisted)} kernel)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
