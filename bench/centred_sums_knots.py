#!/usr/bin/env python3
"""How loose the budget's centred sums become in a matrix-product form (docs/gpu-oracle.md, "Where the time
goes").

The budget needs, per element (i, c), S_ic = sum_j w_ij |V_jc - O_ic|. It depends on the row's O, so no
matrix product computes it, and it is the GPU oracle's largest cost. |V - o| is convex in o, so for o
between two knots t_k <= o <= t_k+1 (per column, around the O values of a tile of rows)

    S_ic <= (1 - lam) S_i(t_k) + lam S_i(t_k+1),   S_i(t) = sum_j w_ij |V_jc - t|,   lam = (o - t_k) / (t_k+1 - t_k),

and each S(t_k) is a matrix product of the weights with |V - t_k|. The interpolation is exact where V does not
lie between the knots; it loses most on a row whose weight sits on a few keys, so each row's m heaviest keys
are summed exactly and only the rest go through the knots. This script measures the ratio of that bound to
the exact sum, with the softmax probabilities as the weights, on the cases that stress it (N(0,1) inputs,
causal rows down to one key, sharp attention, V with a large mean). It needs numpy only.

    python3 bench/centred_sums_knots.py [--n 1024] [--d 64] [--tile 64] [--seed 1]
"""
import argparse

import numpy as np


def knots_bound(P, V, O, knots, tile, top):
    """The bound above for every element: each row's `top` heaviest keys exactly, the rest through `knots`
    evenly spaced knots per column over the O values of each tile of `tile` rows."""
    n, d = O.shape
    heavy = np.argsort(-P, axis=1)[:, :top]
    rest = P.copy()
    np.put_along_axis(rest, heavy, 0.0, axis=1)
    exact_part = centred_sums(P - rest, V, O)
    bound = np.empty_like(O)
    for r0 in range(0, n, tile):
        r = slice(r0, min(n, r0 + tile))
        lo, hi = O[r].min(0), O[r].max(0)
        t = lo[None, :] + (hi - lo)[None, :] * np.linspace(0.0, 1.0, knots)[:, None]
        s_t = np.stack([rest[r] @ np.abs(V - t[k][None, :]) for k in range(knots)])
        h = np.where(hi > lo, (hi - lo) / (knots - 1), 1.0)
        pos = np.clip((O[r] - lo) / h, 0.0, knots - 1 - 1e-12)
        k = np.floor(pos).astype(int)
        lam = pos - k
        rows, cols = np.arange(O[r].shape[0])[:, None], np.arange(d)[None, :]
        bound[r] = exact_part[r] + (1 - lam) * s_t[k, rows, cols] + lam * s_t[np.minimum(k + 1, knots - 1), rows, cols]
    return bound


def centred_sums(W, V, O):
    out = np.empty_like(O)
    for c in range(O.shape[1]):
        out[:, c] = (W * np.abs(V[None, :, c] - O[:, c : c + 1])).sum(1)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1024)
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--tile", type=int, default=64, help="rows sharing their knots")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    if a.n < 1 or a.d < 1 or a.tile < 1:
        ap.error("--n, --d and --tile must be positive")
    rng = np.random.default_rng(a.seed)
    cases = [("N(0,1), scale 1/sqrt(d)", 1 / np.sqrt(a.d), False, 0.0), ("the same, causal", 1 / np.sqrt(a.d), True, 0.0),
             ("sharp: scale 1, causal", 1.0, True, 0.0), ("V mean 3, causal", 1 / np.sqrt(a.d), True, 3.0)]
    print(f"N = {a.n}, d = {a.d}, knots per column per {a.tile} rows, seed {a.seed}; ratio = bound / exact sum "
          "(elements whose exact sum is 0 left out), excess = (bound - exact) / sum_j w_ij |V_jc|")
    print(f"| case | knots | exact keys a row | ratio median | ratio p99 | ratio p99.9 | excess max |")
    print("|---|---|---|---|---|---|---|")
    for name, scale, causal, vmean in cases:
        Q, K = rng.standard_normal((a.n, a.d)), rng.standard_normal((a.n, a.d))
        V = rng.standard_normal((a.n, a.d)) + vmean
        S = scale * Q @ K.T
        if causal:
            S = np.where(np.tril(np.ones((a.n, a.n), bool)), S, -np.inf)
        P = np.exp(S - S.max(1, keepdims=True))
        P /= P.sum(1, keepdims=True)
        O = P @ V
        exact, A = centred_sums(P, V, O), P @ np.abs(V)
        for knots, top in ((4, 0), (4, 32), (8, 32)):
            bound = knots_bound(P, V, O, knots, a.tile, top)
            ratio = (bound / np.where(exact > 0, exact, np.nan)).ravel()
            ratio = ratio[np.isfinite(ratio)]
            q = np.quantile(ratio, [0.5, 0.99, 0.999])
            print(f"| {name} | {knots} | {top} | {q[0]:.4f} | {q[1]:.4f} | {q[2]:.4f} | {((bound - exact) / A).max():.4f} |")


if __name__ == "__main__":
    main()
