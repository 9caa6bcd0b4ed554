#!/usr/bin/env python3
"""Plots of a flashcheck error-budget report, from its report.json alone.

    plot_report.py REPORT_JSON OUT_DIR [SOURCE_NAME]

Writes into OUT_DIR:
  ratio_histogram.png  histogram of error/bound over all O elements, one panel per recipe
  error_vs_n.png       mean |error| and mean bound (and max |error|) against N, one panel per recipe
  error_vs_d.png       the same against the head dim d
  error_vs_tile.png    the same against the key-tile width Bc the budget was derived for
  plots.json           the values plotted, per figure / recipe / subject, and the SHA-256 of the JSON
                       read, so a test can check the pictures were made from this report (SOURCE_NAME
                       is the path it records, when the JSON read is a temporary copy)

Every file is written to a temporary name and renamed into place. FLASHCHECK_PLOT_DPI sets the
resolution (default 110; scripts/docs_reports.sh renders the documentation's sample smaller). Exit
status: 0 done, 2 bad arguments or unreadable JSON, 3 matplotlib missing. flashcheck runs this script itself after writing
report.json; docs/report-format.md describes each plot.
"""
import hashlib
import json
import math
import os
import sys

try:
    DPI = int(os.environ.get("FLASHCHECK_PLOT_DPI", "110"))
except ValueError:
    DPI = 110

AXES = [("n", "n_k", "error_vs_n.png", "sequence length N (n_q = n_k)"),
        ("d", "d", "error_vs_d.png", "head dim d"),
        ("tile", "budget_tile_n", "error_vs_tile.png", "key-tile width Bc")]


def num(x):
    """report.json spells non-finite doubles as strings."""
    if isinstance(x, str):
        return {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}[x]
    return float(x)


def pooled_series(cases, field):
    """Per recipe, subject and axis value: element-weighted means and maxima, as tools/report/aggregate.cpp."""
    out = {}
    for c in cases:
        if c["status"] != "ok":
            continue
        key = out.setdefault(c["recipe"], {}).setdefault(c["subject"], {})
        x = float(c[field])
        p = key.setdefault(x, {"elements": 0, "sum_abs_error": 0.0, "sum_bound": 0.0,
                               "max_abs_error": 0.0, "max_ratio": 0.0})
        p["elements"] += int(c["elements"])
        p["sum_abs_error"] += num(c["sum_abs_error"])
        p["sum_bound"] += num(c["sum_bound"])
        p["max_abs_error"] = max(p["max_abs_error"], num(c["max_abs_error"]))
        p["max_ratio"] = max(p["max_ratio"], num(c["max_ratio"]))
    series = {}
    for recipe, by_subject in out.items():
        for subject, points in by_subject.items():
            xs = sorted(points)
            n = [max(points[x]["elements"], 1) for x in xs]
            series.setdefault(recipe, {})[subject] = {
                "x": xs,
                "mean_error": [points[x]["sum_abs_error"] / k for x, k in zip(xs, n)],
                "mean_bound": [points[x]["sum_bound"] / k for x, k in zip(xs, n)],
                "max_error": [points[x]["max_abs_error"] for x in xs],
                "max_ratio": [points[x]["max_ratio"] for x in xs],
            }
    return series


def histograms(cases, bins):
    out = {}
    for c in cases:
        if c["status"] != "ok":
            continue
        h = out.setdefault(c["recipe"], {}).setdefault(c["subject"], [0] * bins)
        for k, v in enumerate(c["ratio_histogram"]):
            h[k] += int(v)
    return out


def label(subject):
    """As tools/report/report_markdown.cpp names subjects: a plugin by its file name."""
    if subject.startswith("plugin:"):
        return "plugin:" + os.path.basename(subject[len("plugin:"):])
    return subject


def recipe_order(report):
    names = list(report["campaign"]["recipes"])
    for c in report["cases"]:
        if c["recipe"] not in names:
            names.append(c["recipe"])
    return names


def grid(plt, count):
    cols = min(3, max(1, count))
    rows = (count + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 3.9 * rows), squeeze=False)
    flat = [a for row in axes for a in row]
    for a in flat[count:]:
        a.set_visible(False)
    return fig, flat


def save(fig, path):
    tmp = os.path.join(os.path.dirname(path), "." + os.path.basename(path) + ".tmp")
    fig.savefig(tmp, dpi=DPI, format="png")
    os.replace(tmp, path)


def main(argv):
    if len(argv) not in (3, 4):
        print(__doc__, file=sys.stderr)
        return 2
    src, out_dir = argv[1], argv[2]
    shown = argv[3] if len(argv) == 4 else src
    try:
        raw = open(src, "rb").read()
        report = json.loads(raw)
        cases = report["cases"]
        edges = [num(e) for e in report["ratio_histogram_lower_edges"]]
    except (OSError, ValueError, KeyError) as e:
        print(f"plot_report.py: cannot read {src}: {e}", file=sys.stderr)
        return 2
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import matplotlib.ticker
    except ImportError as e:
        print(f"plot_report.py: matplotlib is missing ({e}); install python3-matplotlib", file=sys.stderr)
        return 3
    os.makedirs(out_dir, exist_ok=True)

    recipes = recipe_order(report)
    subjects = list(report["campaign"]["subjects"])
    for c in cases:
        if c["subject"] not in subjects:
            subjects.append(c["subject"])
    colours = {s: f"C{i}" for i, s in enumerate(subjects)}
    partial = " (PARTIAL)" if report.get("partial") else ""
    sidecar = {"source": os.path.abspath(shown), "source_sha256": hashlib.sha256(raw).hexdigest(), "plots": {}}

    # Histogram of error/bound: log-spaced bins from report.json; zeros and tiny ratios in the first bar.
    hist = histograms(cases, len(edges))
    present = [r for r in recipes if r in hist]
    if present:
        fig, axes = grid(plt, len(present))
        lo, hi = edges[1], edges[-1]
        centres = [lo / 10 ** 0.25 * 0.5] + [math.sqrt(edges[k] * edges[k + 1]) for k in range(1, len(edges) - 1)] \
            + [hi * 10 ** 0.125]
        widths = [lo / 10 ** 0.25] + [edges[k + 1] - edges[k] for k in range(1, len(edges) - 1)] + [hi * 10 ** 0.25 - hi]
        sidecar["plots"]["ratio_histogram.png"] = {}
        for ax, recipe in zip(axes, present):
            entry = sidecar["plots"]["ratio_histogram.png"].setdefault(recipe, {})
            for s in subjects:
                counts = hist[recipe].get(s)
                if counts is None:
                    continue
                total = sum(counts) or 1
                ax.step([c for c in centres], [v / total for v in counts], where="mid", color=colours[s],
                        label=f"{label(s)} ({total} elements)")
                entry[s] = {"counts": counts, "elements": sum(counts)}
            ax.axvline(1.0, color="red", linestyle="--", linewidth=1, label="budget (error = bound)")
            ax.set_xscale("log")
            ax.set_xlim(lo / 10 ** 0.5, hi * 10 ** 0.5)
            ax.set_title(f"{recipe}: error / bound{partial}")
            ax.set_xlabel("|error| / bound (first bin: < 1e-8, incl. exact)")
            ax.set_ylabel("fraction of elements")
            ax.grid(True, which="major", alpha=0.3)
            ax.legend(fontsize=7, loc="upper left")
        fig.suptitle("Distribution of error as a fraction of the budget, per recipe", fontsize=11)
        fig.tight_layout(rect=(0, 0, 1, 0.96))
        save(fig, os.path.join(out_dir, "ratio_histogram.png"))
        plt.close(fig)

    for axis, field, name, axis_label in AXES:
        series = pooled_series(cases, field)
        present = [r for r in recipes if r in series]
        if not present:
            continue
        # Per recipe two stacked panels: the error and the bound themselves (top), and the ratio the
        # check is about (bottom; 1 is the budget). Means are per element, pooled over the cases.
        cols = min(3, len(present))
        rows = (len(present) + cols - 1) // cols
        fig, axes = plt.subplots(2 * rows, cols, figsize=(5.4 * cols, 3.3 * 2 * rows), squeeze=False,
                                 gridspec_kw={"height_ratios": [3, 2] * rows})
        sidecar["plots"][name] = {}
        for k in range(rows * cols):
            top, bottom = axes[2 * (k // cols)][k % cols], axes[2 * (k // cols) + 1][k % cols]
            if k >= len(present):
                top.set_visible(False)
                bottom.set_visible(False)
                continue
            recipe = present[k]
            sidecar["plots"][name][recipe] = series[recipe]
            xs = sorted({x for p in series[recipe].values() for x in p["x"]})
            for s, pts in series[recipe].items():
                col = colours[s]
                top.plot(pts["x"], pts["mean_error"], "o-", color=col, label=f"{label(s)}: mean |error|")
                top.plot(pts["x"], pts["mean_bound"], "s--", color=col, alpha=0.8, label=f"{label(s)}: mean bound")
                bottom.plot(pts["x"], pts["max_ratio"], "^-", color=col, label=f"{label(s)}: max error/bound")
            bottom.axhline(1.0, color="red", linestyle="--", linewidth=1, label="budget")
            top.set_yscale("log")
            values = [v for p in series[recipe].values() for k in ("mean_error", "mean_bound") for v in p[k]
                      if v > 0 and math.isfinite(v)]
            if values and math.log10(max(values) / min(values)) < 2.5:
                # A narrow range gets 1-2-5 ticks, each labelled, instead of one lonely power of ten.
                top.yaxis.set_major_locator(matplotlib.ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
                top.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda y, _: f"{y:.0e}"))
                top.yaxis.set_minor_locator(matplotlib.ticker.NullLocator())
            # Linear, 0 to just past 1: the share of the budget used reads directly.
            peak = max((v for p in series[recipe].values() for v in p["max_ratio"] if math.isfinite(v)), default=0)
            bottom.set_ylim(0, max(1.1, 1.05 * peak))
            for ax in (top, bottom):
                if len(xs) > 1:
                    ax.set_xscale("log", base=2)
                ax.set_xticks(xs)
                ax.set_xticklabels([f"{int(x)}" for x in xs], fontsize=8)
                # Only the data's x values as ticks; the log y axis keeps its minor labels, which are the
                # only labels when a panel spans less than a decade.
                ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
                ax.grid(True, alpha=0.3)
            top.set_title(f"{recipe}{partial}")
            top.set_ylabel("|error|, bound")
            top.legend(fontsize=7, loc="best")
            bottom.set_ylabel("max error/bound")
            bottom.set_xlabel(axis_label)
            bottom.legend(fontsize=7, loc="best")
        fig.suptitle(f"Error and budget against {axis_label} (per element, pooled over cases)", fontsize=11)
        fig.tight_layout(rect=(0, 0, 1, 0.97))
        save(fig, os.path.join(out_dir, name))
        plt.close(fig)

    tmp = os.path.join(out_dir, ".plots.json.tmp")
    with open(tmp, "w") as f:
        json.dump(sidecar, f, indent=1)
    os.replace(tmp, os.path.join(out_dir, "plots.json"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
