#!/usr/bin/env python3
"""Summarise the '[ figure ]' lines the GPU tests print: worst error/budget per (subject, recipe, mask),
and the tile- and split-invariance spreads. Usage: summarize_figures.py tests.log"""
import re, sys
from collections import defaultdict

worst = defaultdict(float); lse = defaultdict(float); count = defaultdict(int)
tiles = defaultdict(float); splits = defaultdict(float)
for line in open(sys.argv[1]):
    m = re.match(r"\[ figure \] (\w+) (\w+) ([\w-]+) d=(\d+) .*worst err/tol ([\d.e+-]+|inf|nan), max abs \S+, max lse err (\S+)", line)
    if m:
        k = (m.group(1), m.group(2), m.group(3))
        worst[k] = max(worst[k], float(m.group(5))); lse[k] = max(lse[k], float(m.group(6))); count[k] += 1
        continue
    m = re.match(r"\[ figure \] tile invariance (\w+) d=(\d+) mask=(\d): max \|O_tile - O_default\| = (\S+)", line)
    if m:
        tiles[(m.group(1), int(m.group(2)))] = max(tiles[(m.group(1), int(m.group(2)))], float(m.group(4)))
        continue
    m = re.match(r"\[ figure \] split invariance (\w+) nq=(\d+) splits=(\d+): max \|O_split - O_1\| = (\S+)", line)
    if m:
        splits[m.group(1)] = max(splits[m.group(1)], float(m.group(4)))
print("| subject | recipe | mask | runs | worst err / budget | worst LSE abs err |")
print("|---|---|---|---|---|---|")
for k in sorted(worst):
    print(f"| {k[0]} | {k[1]} | {k[2]} | {count[k]} | {worst[k]:.3f} | {lse[k]:.2e} |")
print("\n| recipe | d | max |O_tile - O_default| over the 3 tiles, causal and not |")
print("|---|---|---|")
for k in sorted(tiles):
    print(f"| {k[0]} | {k[1]} | {tiles[k]:.3g} |")
print("\n| recipe | max |O_split - O_unsplit| over nq in {1,5,16}, splits in {2,3,7,auto} |")
print("|---|---|")
for k in sorted(splits):
    print(f"| {k} | {splits[k]:.3g} |")
