#!/usr/bin/env python3
"""Compile a CUDA translation unit with `nvcc -Xptxas -v` and check what ptxas says of its forward kernels.

  check_spills.py --expect clean --min-kernels 24 -- NVCC ARGS...   every fwd_kernel: 0 bytes spilled and
                                                                    0 bytes of stack frame (local memory),
                                                                    and no kernel's wgmmas serialized
  check_spills.py --expect spill -- NVCC ARGS...                     some fwd_kernel spills (the check's
                                                                    own control: it must see a spill)
  check_spills.py --expect serialized -- NVCC ARGS...                some kernel's wgmmas are serialized (the
                                                                    control of the serialization check)

Serialized wgmmas: where ordinary instructions define a wgmma's accumulator registers inside its pipeline
stage as ptxas sees it (C7515), or the registers do not suffice for the pipeline (C7511), ptxas makes
every wgmma of the kernel wait for the previous one ("Potential Performance Loss: wgmma.mma_async
instructions are serialized"), and kernel v2's overlap of the scores, the softmax and P~ V is gone with
no other sign: the kernel stays correct, only slower.

Only the forward kernels count: v1's `fwd_kernel` and v2's `fwd_v2_kernel` (its guarded redo is the same
template and counts too). v1's redo kernels (fwd_redo_kernel) run only for blocks whose result holds a NaN
leaked from V, and issue #5's criterion is about the default forward instantiations.
"""
import argparse
import re
import subprocess
import sys

ENTRY = re.compile(r"Compiling entry function '([^']+)'")
SERIALIZED = re.compile(r"wgmma\.mma_async instructions are serialized .*in the function '([^']+)'")
FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")


def parse(text):
    """[(kernel, stack_frame, spill_stores, spill_loads)] for every entry function ptxas reports."""
    out, current = [], None
    for line in text.splitlines():
        m = ENTRY.search(line)
        if m:
            current = m.group(1)
            continue
        m = FRAME.search(line)
        if m and current:
            out.append((current, int(m.group(1)), int(m.group(2)), int(m.group(3))))
            current = None
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--expect", choices=("clean", "spill", "serialized"), required=True)
    ap.add_argument("--min-kernels", type=int, default=1, help="fail when ptxas reports fewer fwd_kernels")
    ap.add_argument("nvcc", nargs=argparse.REMAINDER, help="-- then the nvcc command line")
    a = ap.parse_args()
    cmd = a.nvcc[1:] if a.nvcc[:1] == ["--"] else a.nvcc
    if not cmd:
        sys.exit("check_spills: no nvcc command given")
    run = subprocess.run(cmd + ["-Xptxas=-v"], capture_output=True, text=True)
    if run.returncode != 0:
        sys.stderr.write(run.stdout + run.stderr)
        sys.exit(f"check_spills: nvcc failed with exit code {run.returncode}")
    serialized = sorted(set(SERIALIZED.findall(run.stdout + run.stderr)))
    for name in serialized:
        print(f"SERIALIZED wgmma  {name}")
    if a.expect == "serialized":
        if not serialized:
            sys.exit("check_spills: expected a kernel with serialized wgmmas, ptxas reported none (did the toolkit change?)")
        print(f"check_spills: {len(serialized)} kernel(s) with serialized wgmmas, as expected")
        return
    if a.expect == "clean" and serialized:
        sys.exit(f"check_spills: ptxas serialized the wgmmas of {len(serialized)} kernel(s)")
    kernels = [k for k in parse(run.stdout + run.stderr)
               if ("fwd_kernel" in k[0] or "fwd_v2_kernel" in k[0]) and "fwd_redo_kernel" not in k[0]]
    for name, frame, stores, loads in kernels:
        print(f"{'SPILL' if frame or stores or loads else 'ok   '} stack {frame:4d} B, spill stores {stores:4d} B,"
              f" loads {loads:4d} B  {name}")
    if len(kernels) < a.min_kernels:
        sys.exit(f"check_spills: ptxas reported {len(kernels)} fwd_kernel entries, expected at least {a.min_kernels}")
    spilling = [k for k in kernels if k[1] or k[2] or k[3]]
    if a.expect == "clean" and spilling:
        sys.exit(f"check_spills: {len(spilling)} of {len(kernels)} default forward kernels use local memory")
    if a.expect == "spill" and not spilling:
        sys.exit("check_spills: expected a spilling kernel, ptxas reported none (did the toolkit change?)")
    print(f"check_spills: {len(kernels)} forward kernels, {len(spilling)} spilling, as expected ({a.expect})")


if __name__ == "__main__":
    main()
