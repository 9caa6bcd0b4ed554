#!/usr/bin/env python3
"""Compare the flashcheck CUDA kernel with PyTorch SDPA (flash and cuDNN backends) in ONE process.

Our plugin (libflashcheck_cuda_plugin.so) is loaded with ctypes into the PyTorch process and driven through
the C ABI (include/flashcheck/plugin.h) on PyTorch's own device tensors and current stream, so both sides
see the same GPU state, clocks and inputs. Shapes: the FA-3 paper grid, B*N = 16k tokens, H = 2048/d.
FLOPs = 4*B*H*N^2*d, halved for causal. Timing: triton.testing.do_bench (CUDA events), median.

Order matters on a GPU: the first function timed after a pause runs ~4-10% slower, and so does the one
timed right after cuDNN (its kernels draw the most power; measured on the H200 with identical builds of our
plugin: reports/bench-order-h200 and reports/kernel-tuning-h200-s4). A plain rotation keeps the cyclic
order, so one candidate always followed cuDNN; every shape is therefore timed in the rounds of a Williams
design (bench/timing_order.py): each candidate goes first equally often and follows every other candidate
equally often (n rounds for an even number n of candidates, 2n for odd n; --rounds R takes the first R).
Each candidate's figure is the median of its rounds.

  python3 bench/sdpa_compare.py --plugin build/kernels/cuda/libflashcheck_cuda_plugin.so \
      [--dims 64,128] [--seqs 512,...,16384] [--dtypes bf16,fp16] [--fp8] [--json out.json]
      [--ab NAME=PATH[@dD:MxN,...]]   # another build of our plugin (e.g. without the V NaN guard), or the
                         # same one with another tile for head dim D, timed on the same shapes in the same
                         # run: column NAME and the ratio ours/NAME; repeat --ab for more candidates
      [--fa4]            # also FlashAttention's own Hopper kernel from the flash-attn-4 package
                         # (flash_attn.cute.flash_attn_func on BSHD copies of the inputs), column fa4;
                         # when it cannot be imported or run, the reason is printed and the column stays empty
"""
import argparse, ctypes, json, math, os, sys, time

import torch
import torch.nn.functional as F
from torch.nn.attention import sdpa_kernel, SDPBackend
import triton.testing as tt

from timing_order import williams_orders  # bench/, next to this script

FC_ABI_VERSIONS = (1, 2)  # include/flashcheck/plugin.h: FC_ABI_VERSION_MIN .. FC_ABI_VERSION
RECIPE = {"fp32": 0, "fp16": 2, "bf16": 3, "e4m3": 4, "e5m2": 5}
FC_MASK_NONE, FC_MASK_CAUSAL_TOP_LEFT = 0, 1
FC_MEMORY_DEVICE = 2


class FcTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("stride", ctypes.c_int64 * 4)]


class FcProblem(ctypes.Structure):
    _fields_ = [("batch", ctypes.c_int32), ("heads_q", ctypes.c_int32), ("heads_kv", ctypes.c_int32),
                ("n_q", ctypes.c_int64), ("n_k", ctypes.c_int64), ("d", ctypes.c_int32), ("dv", ctypes.c_int32),
                ("scale", ctypes.c_double), ("mask", ctypes.c_int32), ("window_left", ctypes.c_int64),
                ("window_right", ctypes.c_int64), ("window_align", ctypes.c_int32),
                ("key_lengths", ctypes.c_void_p), ("dense_mask", ctypes.c_void_p), ("recipe", ctypes.c_int32),
                ("q_descale", ctypes.c_float), ("k_descale", ctypes.c_float), ("v_descale", ctypes.c_float),
                ("flags", ctypes.c_uint32), ("tile_m", ctypes.c_int32), ("tile_n", ctypes.c_int32),
                ("num_splits", ctypes.c_int32)]


class FcBuffers(ctypes.Structure):
    _fields_ = [("memory", ctypes.c_int32), ("q", FcTensor), ("k", FcTensor), ("v", FcTensor), ("o", FcTensor),
                ("lse", ctypes.c_void_p), ("stream", ctypes.c_void_p),
                ("plan", ctypes.c_void_p)]  # ABI v2: NULL, the run plan is not read here


CAPS_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t)
FWD_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(FcProblem), ctypes.POINTER(FcBuffers), ctypes.c_char_p,
                          ctypes.c_size_t)


class FcPlugin(ctypes.Structure):
    _fields_ = [("abi_version", ctypes.c_uint32), ("capabilities", CAPS_FN), ("forward", FWD_FN)]


def load_plugin(path):
    lib = ctypes.CDLL(os.path.abspath(path))
    entry = lib.flashcheck_plugin_entry
    entry.restype = ctypes.POINTER(FcPlugin)
    plugin = entry().contents
    if plugin.abi_version not in FC_ABI_VERSIONS:
        sys.exit(f"plugin ABI {plugin.abi_version} not in {FC_ABI_VERSIONS}")
    return lib, plugin


def tensor_view(t):
    st = (ctypes.c_int64 * 4)(*t.stride())
    return FcTensor(t.data_ptr(), st)


def fa3_grid_shape(d, n):
    """(heads, batch) of the FA-3 paper's benchmark grid at head dim d and sequence length n: B*N = 16k, H = 2048/d."""
    return 2048 // d, max(1, 16384 // n)


def make_fa4_call(fa4_func, q, k, v, causal):
    """flash-attn-4's forward on BSHD copies of BHSD q, k, v (its layout); its first call compiles (JIT)."""
    q4, k4, v4 = (t.transpose(1, 2).contiguous() for t in (q, k, v))
    return lambda: fa4_func(q4, k4, v4, causal=causal)


def make_call(plugin, q, k, v, o, recipe, causal, descale=1.0, tile=(0, 0)):
    B, H, N, d = q.shape
    p = FcProblem(batch=B, heads_q=H, heads_kv=k.shape[1], n_q=N, n_k=k.shape[2], d=d, dv=d,
                  scale=1.0 / math.sqrt(d), mask=FC_MASK_CAUSAL_TOP_LEFT if causal else FC_MASK_NONE,
                  window_left=-1, window_right=-1, window_align=0, key_lengths=None, dense_mask=None,
                  recipe=recipe, q_descale=descale, k_descale=descale, v_descale=descale, flags=0,
                  tile_m=tile[0], tile_n=tile[1], num_splits=0)
    b = FcBuffers(memory=FC_MEMORY_DEVICE, q=tensor_view(q), k=tensor_view(k), v=tensor_view(v), o=tensor_view(o),
                  lse=None, stream=torch.cuda.current_stream().cuda_stream)
    msg = ctypes.create_string_buffer(512)
    pp, bb = ctypes.byref(p), ctypes.byref(b)

    def call():
        st = plugin.forward(pp, bb, msg, 512)
        if st != 0:
            raise RuntimeError(f"plugin forward failed ({st}): {msg.value.decode()}")
    return call


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--plugin", required=True)
    ap.add_argument("--dims", default="64,128")
    ap.add_argument("--seqs", default="512,1024,2048,4096,8192,16384")
    ap.add_argument("--dtypes", default="bf16,fp16")
    ap.add_argument("--fp8", action="store_true", help="also time our e4m3 recipe (no SDPA counterpart)")
    ap.add_argument("--warmup", type=int, default=25)
    ap.add_argument("--rep", type=int, default=100)
    ap.add_argument("--json", default=None)
    ap.add_argument("--tile", type=int, nargs=2, default=(0, 0), help="tile_m tile_n (default: the policy)")
    ap.add_argument("--check-max-n", type=int, default=4096, help="check our output vs fp32 math up to this N")
    ap.add_argument("--ab", action="append", default=[],
                    help="NAME=PATH[@dD:MxN,...]: another build (or tile) of our plugin, timed beside ours")
    ap.add_argument("--rounds", type=int, default=0,
                    help="timing rounds per shape (default: a full Williams design, n or 2n for n candidates)")
    ap.add_argument("--host-overhead", action="store_true", help="also print each plugin's host time per call")
    ap.add_argument("--fa4", action="store_true", help="also time flash-attn-4's kernel (flash_attn.cute)")
    ap.add_argument("--preload", action="append", default=[],
                    help="load this plugin first and never time it (a control for load-order effects)")
    a = ap.parse_args()
    preloaded = [load_plugin(path) for path in a.preload]
    _lib, plugin = load_plugin(a.plugin)
    others = []  # (name, plugin, {d: (tile_m, tile_n)})
    keep = []
    for spec in a.ab:
        if "=" not in spec:
            sys.exit("--ab wants NAME=PATH[@dD:MxN,...]")
        name, rest = spec.split("=", 1)
        # A row holds the shape's fields and each kernel's column under its name (and NAME_host_us,
        # NAME_max_abs_err): a name that is already a key would overwrite it (--ab B=... did the batch size).
        taken = {"dtype", "d", "N", "B", "H", "causal", "ours", "flash", "cudnn", "fa4", "max_abs_err_vs_fp32_math"}
        taken |= {n for n, _, _ in others}
        if not name.isidentifier() or name in taken or name.startswith("ratio_"):
            sys.exit(f"--ab name {name!r}: want an identifier that names no other column or field of a row "
                     f"(taken: {', '.join(sorted(taken))}; and ratio_*)")
        path, _, tiles = rest.partition("@")
        per_d = {}
        for item in filter(None, tiles.split(",")):
            try:
                dd, mn = item.split(":")
                m, n = mn.split("x")
                per_d[int(dd.lstrip("d"))] = (int(m), int(n))
            except ValueError:
                sys.exit(f"--ab tile item {item!r}: want dD:MxN")
        lib, plug = load_plugin(path)
        keep.append(lib)
        others.append((name, plug, per_d))
    fa4 = None
    if a.fa4:
        try:
            from flash_attn.cute import flash_attn_func as fa4
        except Exception as e:  # not installed, or its CuTe DSL does not load here
            print(f"fa4: flash_attn.cute cannot be imported: {type(e).__name__}: {e}", flush=True)
    ab_names = [n for n, _, _ in others] + (["fa4"] if fa4 else [])
    dev = "cuda"
    print("torch", torch.__version__, torch.cuda.get_device_name(), "cudnn", torch.backends.cudnn.version(), flush=True)
    torch.manual_seed(0)
    rows = []
    tdt = {"bf16": torch.bfloat16, "fp16": torch.float16}
    for dname in a.dtypes.split(","):
        dtype = tdt[dname]
        for d in map(int, a.dims.split(",")):
            for N in map(int, a.seqs.split(",")):
                for causal in (False, True):
                    H, B = fa3_grid_shape(d, N)
                    q, k, v = (torch.randn(B, H, N, d, device=dev, dtype=dtype) for _ in range(3))
                    o = torch.empty_like(q)
                    flops = 4 * B * H * N * N * d / (2 if causal else 1)
                    for _plib, pre in preloaded:  # untimed: only so that ours is not the first plugin called
                        make_call(pre, q, k, v, o, RECIPE[dname], causal)()
                    ours = make_call(plugin, q, k, v, o, RECIPE[dname], causal, tile=tuple(a.tile))
                    ours(); torch.cuda.synchronize()
                    row = {"dtype": dname, "d": d, "N": N, "B": B, "H": H, "causal": causal}
                    ref = None
                    if N <= a.check_max_n:  # sanity check of our output against fp32 math SDPA
                        with sdpa_kernel(SDPBackend.MATH):
                            ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
                        row["max_abs_err_vs_fp32_math"] = float((o.float() - ref).abs().max())
                    def bench(fn, backend=None):
                        def measure():
                            if backend is None:
                                return tt.do_bench(fn, warmup=a.warmup, rep=a.rep, return_mode="median")
                            with sdpa_kernel(backend):
                                return tt.do_bench(fn, warmup=a.warmup, rep=a.rep, return_mode="median")
                        return measure
                    candidates = [("ours", bench(ours))]
                    for ab_name, ab_plugin, per_d in others:
                        other = make_call(ab_plugin, q, k, v, o, RECIPE[dname], causal, tile=per_d.get(d, tuple(a.tile)))
                        other(); torch.cuda.synchronize()
                        if ref is not None:
                            row[ab_name + "_max_abs_err"] = float((o.float() - ref).abs().max())
                        candidates.append((ab_name, bench(other)))
                    del ref
                    if fa4:
                        f4 = make_fa4_call(fa4, q, k, v, causal)
                        try:
                            f4(); torch.cuda.synchronize()
                            candidates.append(("fa4", bench(f4)))
                        except Exception as e:
                            row["fa4"] = None
                            row["fa4_error"] = f"{type(e).__name__}: {e}"[:300]
                            print(f"fa4 failed on d={d} N={N} causal={causal}: {row['fa4_error']}", flush=True)
                    f = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                    for name, be in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
                        try:
                            with sdpa_kernel(be):
                                f(); torch.cuda.synchronize()
                            candidates.append((name, bench(f, be)))
                        except Exception:  # backend not available for this shape
                            row[name] = None
                    if a.host_overhead:  # host time per call, launches queued without waiting (20 calls)
                        for name, fn in [("ours", ours)] + [(n, make_call(pl, q, k, v, o, RECIPE[dname], causal))
                                                            for n, pl, _ in others]:
                            torch.cuda.synchronize()
                            t0 = time.perf_counter()
                            for _ in range(20):
                                fn()
                            row[name + "_host_us"] = round((time.perf_counter() - t0) / 20 * 1e6, 1)
                        torch.cuda.synchronize()
                    times = {name: [] for name, _ in candidates}
                    orders = williams_orders(len(candidates))
                    for r in range(a.rounds or len(orders)):
                        for i in orders[r % len(orders)]:
                            name, measure = candidates[i]
                            times[name].append(measure())
                    for name, ms in times.items():
                        row[name] = flops / sorted(ms)[len(ms) // 2] / 1e9
                    rows.append(row)
                    print(json.dumps({k2: (round(v2, 1) if isinstance(v2, float) and "err" not in k2 else v2)
                                      for k2, v2 in row.items()}), flush=True)
                    del q, k, v, o
    if a.fp8:
        for d in map(int, a.dims.split(",")):
            for N in map(int, a.seqs.split(",")):
                for causal in (False, True):
                    H, B = fa3_grid_shape(d, N)
                    q, k, v = ((torch.randn(B, H, N, d, device=dev) * 8).to(torch.float8_e4m3fn) for _ in range(3))
                    o = torch.empty(B, H, N, d, device=dev, dtype=torch.bfloat16)
                    flops = 4 * B * H * N * N * d / (2 if causal else 1)
                    ours = make_call(plugin, q, k, v, o, RECIPE["e4m3"], causal, descale=0.125)
                    ours(); torch.cuda.synchronize()
                    row = {"dtype": "e4m3", "d": d, "N": N, "B": B, "H": H, "causal": causal,
                           "ours": flops / tt.do_bench(ours, warmup=a.warmup, rep=a.rep, return_mode="median") / 1e9}
                    rows.append(row)
                    print(json.dumps(row), flush=True)
                    del q, k, v, o

    abh = "".join(f" {n} | ours/{n} |" for n in ab_names)
    print(f"\n| dtype | d | N | causal | ours TFLOP/s |{abh} flash | cuDNN | ours/flash | ours/cuDNN | max err vs fp32 |")
    print("|---|---|---|---|---|" + "---|---|" * len(ab_names) + "---|---|---|---|---|")
    for r in rows:
        fl, cu = r.get("flash"), r.get("cudnn")
        rf = r["ours"] / fl if fl else None
        rc = r["ours"] / cu if cu else None
        r["ratio_flash"], r["ratio_cudnn"] = rf, rc
        fmt = lambda x, s="{:.1f}": "-" if x is None else s.format(x)
        abc = ""
        for ab_name in ab_names:
            ab = r.get(ab_name)
            r["ratio_" + ab_name] = r["ours"] / ab if ab else None
            abc += f" {fmt(ab)} | {fmt(r['ratio_' + ab_name], '{:.3f}')} |"
        print(f"| {r['dtype']} | {r['d']} | {r['N']} | {'yes' if r['causal'] else 'no'} | {r['ours']:.1f} |{abc} {fmt(fl)} | "
              f"{fmt(cu)} | {fmt(rf, '{:.2f}')} | {fmt(rc, '{:.2f}')} | {fmt(r.get('max_abs_err_vs_fp32_math'), '{:.2e}')} |")
    print()
    for dname in a.dtypes.split(","):
        for key in ("ratio_flash", "ratio_cudnn") + tuple("ratio_" + n for n in ab_names):
            vals = [r[key] for r in rows if r["dtype"] == dname and r.get(key)]
            if vals:
                gm = math.exp(sum(math.log(x) for x in vals) / len(vals))
                print(f"geomean {dname} ours/{key.split('_', 1)[1]}: {gm:.3f} over {len(vals)} shapes")
        for name in ab_names:
            vals = [r[name] / r["flash"] for r in rows if r["dtype"] == dname and r.get(name) and r.get("flash")]
            if vals:
                gm = math.exp(sum(math.log(x) for x in vals) / len(vals))
                print(f"geomean {dname} {name}/flash: {gm:.3f} over {len(vals)} shapes")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
