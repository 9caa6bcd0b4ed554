#!/usr/bin/env python3
"""Timing orders for benchmarks that compare several functions on one GPU (bench/sdpa_compare.py).

On the H200 the function timed first after a pause, and the one timed right after cuDNN (its kernels draw
the most power), run ~4-6% slower (docs/reports/bench-order-h200, docs/reports/kernel-tuning-h200-s4: two
identical builds of our plugin differ by that much when only one of them follows cuDNN). A plain rotation
keeps the cyclic order, so the same candidate always follows the same neighbour. A Williams design
balances both effects: every candidate is first equally often and follows every other candidate equally
often.

  python3 bench/timing_order.py --self-test    # checks the balance for 2..9 candidates (ctest: bench_timing_order)
"""
import sys
from collections import Counter


def williams_orders(n):
    """Orders of range(n), balanced for first-order carry-over: each index is first, and follows each other
    index, equally often (n orders for even n, 2n for odd n)."""
    if n < 1:
        raise ValueError("williams_orders: need at least one candidate")
    first, lo, hi = [0], 1, n - 1
    while len(first) < n:
        first.append(lo)
        lo += 1
        if len(first) < n:
            first.append(hi)
            hi -= 1
    orders = [[(x + r) % n for x in first] for r in range(n)]
    if n % 2:
        orders += [list(reversed(o)) for o in orders]
    return orders


def self_test():
    for n in range(1, 10):
        orders = williams_orders(n)
        assert len(orders) == (n if n % 2 == 0 else 2 * n) or n == 1, n
        assert all(sorted(o) == list(range(n)) for o in orders), n
        firsts = Counter(o[0] for o in orders)
        pairs = Counter((o[k], o[k + 1]) for o in orders for k in range(n - 1))
        assert len(set(firsts.values())) == 1 and len(firsts) == n, (n, firsts)
        if n > 1:
            assert len(pairs) == n * (n - 1) and len(set(pairs.values())) == 1, (n, pairs)
    # the plain rotation this replaced fails the check: candidate 0 always follows candidate n-1
    rotation = [list(range(r, 4)) + list(range(r)) for r in range(4)]
    rot_pairs = Counter((o[k], o[k + 1]) for o in rotation for k in range(3))
    assert rot_pairs[(3, 0)] == 3 and rot_pairs[(0, 3)] == 0
    print("timing_order: Williams designs balanced for 1..9 candidates")


if __name__ == "__main__":
    if sys.argv[1:] == ["--self-test"]:
        self_test()
    else:
        for n in map(int, sys.argv[1:] or ["3"]):
            print(n, williams_orders(n))
