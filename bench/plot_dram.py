#!/usr/bin/env python3
"""DRAM traffic and peak memory of one forward, fused vs naive, as N grows: the seed's thesis, measured.

Input: the CSV that Nsight Compute writes for
  ncu --clock-control none --metrics dram__bytes_read.sum,dram__bytes_write.sum --csv \
      bench_fused_attention --skip-grid --naive-memory
(the `dram` step of scripts/device/h200_batch.sh), and optionally the same program's stdout without ncu for
the peak-memory table. The bench runs, for each N in its list, one fused forward (kernel fwd_kernel) and one
naive forward (naive_scores, naive_softmax, naive_pv); launches are attributed in that order.

  python3 bench/plot_dram.py ncu.csv [--memory bench.log] [--out dram.png] [--json dram.json]
"""
import argparse
import csv
import json
import re
import sys

# The N list of bench_fused_attention --naive-memory, in launch order (B=1, H=16, d=128, bf16).
DEFAULT_NS = "512,1024,2048,4096,8192"
B, H, D, ELEM = 1, 16, 128, 2


def read_launches(path):
    """[(kernel name, {metric: bytes})] in launch order from ncu's --csv output (other lines skipped)."""
    with open(path, newline="") as f:
        lines = [ln for ln in f if ln.startswith('"')]
    rows = list(csv.reader(lines))
    if not rows or "Kernel Name" not in rows[0]:
        sys.exit(f"{path}: no ncu CSV header (\"ID\", ..., \"Kernel Name\", ...) found")
    hdr = rows[0]
    idx = {k: hdr.index(k) for k in ("ID", "Kernel Name", "Metric Name", "Metric Unit", "Metric Value")}
    scale = {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "KB": 1e3, "MB": 1e6, "GB": 1e9}
    launches = {}
    for r in rows[1:]:
        if len(r) != len(hdr):
            continue
        lid = int(r[idx["ID"]])
        name = r[idx["Kernel Name"]]
        unit = r[idx["Metric Unit"]]
        if unit not in scale:
            sys.exit(f"{path}: unknown unit {unit!r} for {r[idx['Metric Name']]}")
        value = float(r[idx["Metric Value"]].replace(",", "")) * scale[unit]
        launches.setdefault(lid, (name, {}))[1][r[idx["Metric Name"]]] = value
    return [launches[k] for k in sorted(launches)]


def attribute(launches, ns):
    """Sum DRAM bytes per (N, subject). A fused launch opens the next N; naive kernels follow it."""
    out = []
    for name, m in launches:
        total = m.get("dram__bytes_read.sum", 0.0) + m.get("dram__bytes_write.sum", 0.0)
        if "fwd_kernel" in name and "redo" not in name:
            if len(out) == len(ns):
                sys.exit(f"more fused launches than N values ({ns}); pass --ns")
            out.append({"N": ns[len(out)], "fused": 0.0, "naive": 0.0, "naive_kernels": 0})
        if not out:
            continue  # launches before the first fused forward (none expected)
        if name.startswith("naive_") or "naive_" in name:
            out[-1]["naive"] += total
            out[-1]["naive_kernels"] += 1
        else:
            out[-1]["fused"] += total
    if len(out) != len(ns):
        sys.exit(f"found {len(out)} fused forwards, expected {len(ns)} (N = {ns})")
    for row in out:
        n = row["N"]
        row["qkvo_bytes"] = 4 * B * H * n * D * ELEM      # reading Q, K, V and writing O once
        row["s_bytes"] = B * H * n * n * 4                 # one fp32 N x N score matrix
    return out


def read_memory(path):
    """Peak extra device memory table printed by --naive-memory: {N: (fused MiB, naive MiB)}."""
    peaks = {}
    with open(path) as f:
        for ln in f:
            m = re.match(r"\s*(\d+)\s+(-?[\d.]+)\s+(-?[\d.]+)\s*$", ln)
            if m:
                peaks[int(m.group(1))] = (float(m.group(2)), float(m.group(3)))
    return peaks


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--memory", help="stdout of bench_fused_attention --skip-grid --naive-memory")
    ap.add_argument("--ns", default=DEFAULT_NS)
    ap.add_argument("--out", default=None, help="PNG plot (needs matplotlib)")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    ns = [int(x) for x in a.ns.split(",")]
    rows = attribute(read_launches(a.csv), ns)
    peaks = read_memory(a.memory) if a.memory else {}
    for r in rows:
        if r["N"] in peaks:
            r["fused_peak_mib"], r["naive_peak_mib"] = peaks[r["N"]]
    print("| N | fused DRAM MB | naive DRAM MB | naive/fused | Q,K,V,O once MB | one fp32 S MB | fused peak MiB | naive peak MiB |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['N']} | {r['fused'] / 1e6:.1f} | {r['naive'] / 1e6:.1f} | {r['naive'] / r['fused']:.1f} | "
              f"{r['qkvo_bytes'] / 1e6:.1f} | {r['s_bytes'] / 1e6:.1f} | {r.get('fused_peak_mib', '-')} | "
              f"{r.get('naive_peak_mib', '-')} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    if a.out:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, axes = plt.subplots(1, 2 if peaks else 1, figsize=(11 if peaks else 6, 4.2), squeeze=False)
        ax = axes[0][0]
        x = [r["N"] for r in rows]
        ax.loglog(x, [r["fused"] / 1e6 for r in rows], "o-", label="fused (ours)")
        ax.loglog(x, [r["naive"] / 1e6 for r in rows], "s-", label="naive (S, P in DRAM)")
        ax.loglog(x, [r["qkvo_bytes"] / 1e6 for r in rows], "k:", label="Q, K, V, O once")
        ax.set_xlabel("N (B=1, H=16, d=128, bf16)")
        ax.set_ylabel("DRAM bytes read + written, MB")
        ax.set_title("DRAM traffic of one forward (ncu)")
        ax.legend()
        if peaks:
            ax = axes[0][1]
            px = [n for n in x if n in peaks]
            ax.semilogx(px, [peaks[n][0] for n in px], "o-", label="fused (ours)")
            ax.semilogx(px, [peaks[n][1] for n in px], "s-", label="naive")
            ax.set_xlabel("N")
            ax.set_ylabel("peak extra device memory, MiB")
            ax.set_title("Workspace beyond Q, K, V, O")
            ax.legend()
        fig.tight_layout()
        fig.savefig(a.out, dpi=120)
        print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
