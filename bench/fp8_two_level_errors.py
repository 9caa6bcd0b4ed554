#!/usr/bin/env python3
"""fp8 error against flashcheck's budget, with and without two-level accumulation, as N grows.

Two-level accumulation (FC_FLAG_TWO_LEVEL_ACCUM: the P.V partial sum of each key tile starts from zero and
is added to the fp32 accumulator) matters when one accumulation chain gets long, i.e. at large N, and most
when V has a mean (the v_mean distribution: every term has the same sign). Each case is one
`flashcheck check --json` run; the budget is derived for the option that ran, so both columns are judged
against their own bound, and the error columns compare the kernels directly.

  python3 bench/fp8_two_level_errors.py [--flashcheck PATH] [--subject cuda] [--n 512,2048,4096]
      [--d 64,128] [--dists normal,v_mean] [--jobs N] [--json out.json]

The cases run as --jobs parallel processes (default: one per CPU); the float64 reference on the CPU is
what takes the time (about a minute per case at N = 4096), not the kernel.

Exit 1 if any case violates its budget or fails, 2 on a usage error.
"""
import argparse, json, os, subprocess, sys
from concurrent.futures import ThreadPoolExecutor


def run_check(exe, subject, recipe, n, d, dist, two_level):
    args = [exe, "check", "--subject", subject, "--recipe", recipe, "--n", str(n), "--d", str(d), "--dist", dist,
            "--heads-q", "2", "--heads-kv", "1", "--mask", "none", "--worst", "0", "--json"]
    if two_level:
        args.append("--two-level")
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode == 2:
        sys.exit(f"fp8_two_level_errors: {' '.join(args)}: {r.stderr.strip() or r.stdout.strip()}")
    try:
        rec = json.loads(r.stdout)
    except json.JSONDecodeError:
        sys.exit(f"fp8_two_level_errors: no JSON from {' '.join(args)}: {r.stderr.strip()}")
    rec["exit_code"] = r.returncode
    return rec


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--flashcheck", default=os.environ.get("FLASHCHECK_EXE", "flashcheck"))
    ap.add_argument("--subject", default="cuda")
    ap.add_argument("--recipes", default="fp8_e4m3,fp8_e5m2")
    ap.add_argument("--n", default="512,2048,4096")
    ap.add_argument("--d", default="64,128")
    ap.add_argument("--dists", default="normal,v_mean")
    ap.add_argument("--json", default=None)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    a = ap.parse_args()
    rows, bad = [], 0
    print("| recipe | d | N | dist | max err/bound (one chain) | max err/bound (two-level) | max abs err (one) "
          "| max abs err (two-level) | RMSE ratio two/one |")
    print("|---|---|---|---|---|---|---|---|---|")
    # (recipe, n, d, dist): run_check's argument order
    cases = [(recipe, n, d, dist) for recipe in a.recipes.split(",") for d in map(int, a.d.split(","))
             for n in map(int, a.n.split(",")) for dist in a.dists.split(",")]
    with ThreadPoolExecutor(max_workers=max(1, a.jobs)) as pool:
        futures = [(c, pool.submit(run_check, a.flashcheck, a.subject, *c, False),
                    pool.submit(run_check, a.flashcheck, a.subject, *c, True)) for c in cases]
        for (recipe, n, d, dist), f_one, f_two in futures:
            one, two = f_one.result(), f_two.result()
            for rec in (one, two):
                if rec["exit_code"] != 0 or rec["status"] != "ok" or rec["violations"]:
                    bad += 1
            rmse = lambda r: (r["sum_sq_error"] / max(r["elements"], 1)) ** 0.5
            ratio = rmse(two) / rmse(one) if rmse(one) > 0 else float("nan")
            print(f"| {recipe} | {d} | {n} | {dist} | {one['max_ratio']:.3f} | {two['max_ratio']:.3f} | "
                  f"{one['max_abs_error']:.3g} | {two['max_abs_error']:.3g} | {ratio:.3f} |", flush=True)
            rows.append({"recipe": recipe, "d": d, "n": n, "dist": dist, "one_chain": one, "two_level": two})
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    print(f"\n{len(rows) * 2} cases, {bad} with a violation or a failure")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
