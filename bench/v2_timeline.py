#!/usr/bin/env python3
"""Where a key step of kernel v2 spends its clocks: each consumer warpgroup's phases, from clock64() stamps.

Nsight Compute says how busy the tensor pipe is, not which warpgroup's phase leaves it idle. A build of v2
with -DFC_V2_TIMELINE (kernels/cuda/v2_timeline.h) stamps, in block 0's third work tile, every phase of
every key step of each consumer warpgroup, and prints them after the sixth launch. This script runs that
build on each shape (a child process per shape, whose stdout holds the device's printf), then prints the
median clocks of each phase over the tile's steps (the first two and the last left out), where the work
tile's time goes (its first step, the steps after it, the last P~V, the epilogue) and each shape's time
with and without the stamps, so that what the stamps cost is on the page:

    cmake -S . -B build-timeline -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHCHECK_CUDA=ON \
        -DFLASHCHECK_PROOFS=OFF -DFLASHCHECK_FUZZ=OFF -DCMAKE_CUDA_FLAGS=-DFC_V2_TIMELINE
    ninja -C build-timeline flashcheck_cuda_v2_plugin
    python3 bench/v2_timeline.py --plugin build-timeline/kernels/cuda/libflashcheck_cuda_v2_plugin.so \
        --base build/kernels/cuda/libflashcheck_cuda_v2_plugin.so --shapes bf16:128:16384:0 bf16:64:16384:1

Shapes are dtype:d:N:causal on the FA-3 grid (B*N = 16k, H = 2048 / d). Needs a GPU and PyTorch.
"""
import argparse
import statistics
import subprocess
import sys

PHASES = ["step begins", "K landed", "S issued", "P~V issued", "S ready", "softmax done", "P~V done", "rounded",
          "products done", "stored"]
# (label, from phase, to phase); "next" is the next step's first stamp.
SPANS = [("wait for K", 0, 1), ("issue S", 1, 2), ("rescale O, wait for V, issue P~V", 2, 3), ("wait for S", 3, 4),
         ("mask, max, exponentials", 4, 5), ("wait for P~V", 5, 6), ("round P~", 6, 7), ("to the next step", 7, "next"),
         ("whole step", 0, "next")]


def child(a):
    import math
    import os
    import torch
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import sdpa_compare as sc
    dname, d, n, causal = a.child.split(":")
    d, n, causal = int(d), int(n), causal == "1"
    lib, plug = sc.load_plugin(a.plugin)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[dname]
    heads, batch = sc.fa3_grid_shape(d, n)
    torch.manual_seed(0)
    q, k, v = (torch.randn(batch, heads, n, d, device="cuda", dtype=dtype) for _ in range(3))
    o = torch.empty_like(q)
    call = sc.make_call(plug, q, k, v, o, sc.RECIPE[dname], causal)
    times = []
    for _ in range(10):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        call()
        e1.record()
        torch.cuda.synchronize()
        times.append(e0.elapsed_time(e1))
    print(f"ms {statistics.median(times):.4f}", flush=True)
    assert math.isfinite(float(o.float().abs().max()))


def run_child(plugin, shape):
    r = subprocess.run([sys.executable, __file__, "--plugin", plugin, "--child", shape], capture_output=True, text=True,
                       timeout=120)
    if r.returncode != 0:
        sys.exit(f"v2_timeline: {shape} on {plugin} failed ({r.returncode}): {r.stderr[-2000:]}")
    return r.stdout


def parse(text):
    rows, ms = {}, None
    for line in text.splitlines():
        f = line.split()
        if line.startswith("ms "):
            ms = float(f[1])
        elif line.startswith("TL ") and len(f) == 3 + len(PHASES):
            rows.setdefault(int(f[1]), {})[int(f[2])] = [int(x) for x in f[3:]]
    return rows, ms


def spans(steps):
    n = len(steps)
    if n < 5:
        return None
    out = {}
    for label, a, b in SPANS:
        vals = []
        for i in range(2, n - 1):
            end = steps[i + 1][0] if b == "next" else steps[i][b]
            vals.append(end - steps[i][a])
        out[label] = statistics.median(vals)
    return out


def tile_spans(steps):
    """The work tile of one warpgroup: its first key step (no P~V to overlap), the steps after it, the wait
    for its last P~V and its epilogue (O and the LSE stored), from step 0's row of stamps."""
    first, last = steps[0], steps[-1]
    products, stored = first[8], first[9]
    after_first = steps[1][0] if len(steps) > 1 else products
    rounded_last = last[7] if len(steps) > 1 else after_first
    return {"first key step": after_first - first[0], "the other key steps": rounded_last - after_first,
            "last P~V": products - rounded_last, "epilogue": stored - products, "whole work tile": stored - first[0]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--plugin", required=True, help="v2 built with -DFC_V2_TIMELINE")
    ap.add_argument("--base", help="the same v2 without it (times the stamps' cost)")
    ap.add_argument("--shapes", nargs="+", default=["bf16:128:16384:0"])
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        return child(a)
    for shape in a.shapes:
        rows, ms = parse(run_child(a.plugin, shape))
        base_ms = parse(run_child(a.base, shape))[1] if a.base else None
        if not rows:
            sys.exit(f"v2_timeline: no stamps for {shape}: is {a.plugin} built with -DFC_V2_TIMELINE?")
        steps = {wg: [r[i] for i in sorted(r)] for wg, r in rows.items()}
        cols = {wg: spans(s) for wg, s in steps.items()}
        n_steps = min(len(s) for s in steps.values())
        cost = f", without stamps {base_ms:.3f} ms" if base_ms else ""
        print(f"\n{shape}: {n_steps} key steps in the recorded work tile; {ms:.3f} ms with stamps{cost}")
        wgs = sorted(cols)
        tiles = {w: tile_spans(steps[w]) for w in wgs}
        print("| work tile (clocks) | " + " | ".join(f"warpgroup {w}" for w in wgs) + " |")
        print("|---|" + "---:|" * len(wgs))
        for label in tiles[wgs[0]]:
            print(f"| {label} | " + " | ".join(f"{tiles[w][label]}" for w in wgs) + " |")
        if any(c is None for c in cols.values()):
            print("(too few key steps for the phases' medians)")
            continue
        print()
        print("| phase (median clocks) | " + " | ".join(f"warpgroup {w}" for w in wgs) + " |")
        print("|---|" + "---:|" * len(wgs))
        for label, _, _ in SPANS:
            print(f"| {label} | " + " | ".join(f"{cols[w][label]:.0f}" for w in wgs) + " |")


if __name__ == "__main__":
    main()
