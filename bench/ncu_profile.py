#!/usr/bin/env python3
"""One forward of our kernel and one of PyTorch's flash (and cuDNN) on the same tensors, for Nsight Compute.

Run it under `ncu --profile-from-start off`: the warm-up calls happen before cudaProfilerStart, so only the
measured calls are profiled, in a fixed order (ours, flash, cuDNN, then with --fa4 flash-attn-4's kernel on
BSHD copies). The point is to compare the kernels' instruction mix, stall reasons and pipe use, not their
times (ncu serialises and replays each kernel).

  ncu --profile-from-start off --set full -o prof python3 bench/ncu_profile.py --plugin lib.so --d 128 --n 4096
"""
import argparse
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import sdpa_kernel, SDPBackend

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sdpa_compare import RECIPE, fa3_grid_shape, load_plugin, make_call, make_fa4_call  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--plugin", required=True)
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--dtype", default="bf16", choices=("bf16", "fp16"))
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--tile", type=int, nargs=2, default=(0, 0), help="tile_m tile_n (default: the policy)")
    ap.add_argument("--no-sdpa", action="store_true", help="profile only our kernel")
    ap.add_argument("--fa4", action="store_true", help="also flash-attn-4's kernel (flash_attn.cute)")
    a = ap.parse_args()
    _lib, plugin = load_plugin(a.plugin)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[a.dtype]
    H, B = fa3_grid_shape(a.d, a.n)
    torch.manual_seed(0)
    q, k, v = (torch.randn(B, H, a.n, a.d, device="cuda", dtype=dtype) for _ in range(3))
    o = torch.empty_like(q)
    ours = make_call(plugin, q, k, v, o, RECIPE[a.dtype], a.causal, tile=tuple(a.tile))
    sdpa = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=a.causal)
    backends = [] if a.no_sdpa else [SDPBackend.FLASH_ATTENTION, SDPBackend.CUDNN_ATTENTION]
    fa4 = None
    if a.fa4:  # its first call compiles (JIT), inside the warm-up
        from flash_attn.cute import flash_attn_func
        fa4 = make_fa4_call(flash_attn_func, q, k, v, a.causal)
    def call_all():
        ours()
        for be in backends:
            with sdpa_kernel(be):
                sdpa()
        if fa4:
            fa4()
        torch.cuda.synchronize()

    for _ in range(3):  # warm-up: module load, cuDNN plan, caches
        call_all()
    torch.cuda.profiler.start()
    call_all()
    torch.cuda.profiler.stop()
    print(f"profiled: {a.dtype} d={a.d} N={a.n} B={B} H={H} causal={a.causal} tile={tuple(a.tile)}")


if __name__ == "__main__":
    main()
