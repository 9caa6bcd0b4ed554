#!/usr/bin/env python3
"""PyTorch's float64 reference at production shapes: SDPA's math backend on float64 copies of the inputs,
the only float64 attention PyTorch has (flash, cuDNN and efficient do not take float64). It materialises the
B x H x N x N scores and probabilities, so its memory grows as N^2; it has no error bound of its own and
computes no error budget. Timed with CUDA events after one warm-up, median of --reps; the peak device
memory is torch.cuda.max_memory_allocated. The GPU oracle's figures on the same shape come from
bench/oracle_scale.cpp in the same device run.

  python3 bench/torch_f64_reference.py [--b 1] [--h 16] [--n 16384] [--d 128] [--causal] [--reps 3]
"""
import argparse, statistics

import torch
import torch.nn.functional as F
from torch.nn.attention import sdpa_kernel, SDPBackend


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--b", type=int, default=1)
    ap.add_argument("--h", type=int, default=16)
    ap.add_argument("--n", type=int, default=16384)
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    g = torch.Generator(device="cuda").manual_seed(1)
    shape = (a.b, a.h, a.n, a.d)
    q, k, v = (torch.randn(shape, device="cuda", generator=g).to(torch.bfloat16).to(torch.float64) for _ in range(3))
    tag = f"B={a.b} H={a.h} N={a.n} d={a.d}{' causal' if a.causal else ''}"
    torch.cuda.reset_peak_memory_stats()
    times = []
    try:
        with sdpa_kernel([SDPBackend.MATH]):
            for rep in range(a.reps + 1):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                out = F.scaled_dot_product_attention(q, k, v, is_causal=a.causal)
                end.record()
                torch.cuda.synchronize()
                if rep > 0:
                    times.append(start.elapsed_time(end) / 1e3)
                del out
    except torch.OutOfMemoryError as e:
        print(f"torch float64 math SDPA {tag}: out of memory ({str(e).splitlines()[0]})")
        return
    peak = torch.cuda.max_memory_allocated() / 2**30
    print(f"torch float64 math SDPA {tag}: median {statistics.median(times):.3f} s over {len(times)} runs, "
          f"peak device memory {peak:.1f} GiB")


if __name__ == "__main__":
    main()
