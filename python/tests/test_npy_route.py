"""The NPY route end to end: `flashcheck reference` agrees with numpy's float64 attention, bf16 inputs
as uint16 bit patterns round-trip, `compare` exits 0 / 1 / 2, and a malformed file is refused with a
message naming the file and the problem."""
import os
import subprocess

import numpy as np
import pytest

import flashcheck
from test_assert_attention_close import attention, inputs


def run(exe, *args):
    return subprocess.run([exe, *map(str, args)], capture_output=True, text=True)


def save(tmp_path, **arrays):
    paths = {}
    for name, a in arrays.items():
        paths[name] = tmp_path / f"{name}.npy"
        np.save(paths[name], a)
    return paths


def test_reference_matches_numpy_float64(exe, tmp_path):
    q, k, v = inputs(10, (2, 4, 31, 16), (2, 2, 45, 16))
    p = save(tmp_path, q=q, k=k, v=v)
    r = run(exe, "reference", "--q", p["q"], "--k", p["k"], "--v", p["v"], "--out", tmp_path / "o.npy",
            "--lse", tmp_path / "lse.npy")
    assert r.returncode == 0, r.stderr
    o, lse = np.load(tmp_path / "o.npy"), np.load(tmp_path / "lse.npy")
    want_o, want_lse = attention(q, k, v)
    assert o.dtype == np.float64 and o.shape == (2, 4, 31, 16) and lse.shape == (2, 4, 31)
    np.testing.assert_allclose(o, want_o, rtol=0, atol=1e-12)
    np.testing.assert_allclose(lse, want_lse, rtol=0, atol=1e-12)


def test_bf16_bit_patterns_and_multiprecision(exe, tmp_path):
    rng = np.random.default_rng(11)
    f32 = rng.standard_normal((3, 1, 1, 9, 8)).astype(np.float32)
    bits = (f32.view(np.uint32) >> 16).astype(np.uint16)  # truncation: still bf16 values
    values = (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    p = save(tmp_path, q=bits[0], k=bits[1], v=bits[2])
    r = run(exe, "reference", "--q", p["q"], "--k", p["k"], "--v", p["v"], "--format", "bf16", "--precision",
            "multiprecision", "--out", tmp_path / "o.npy")
    assert r.returncode == 0, r.stderr
    want, _ = attention(values[0], values[1], values[2])
    np.testing.assert_allclose(np.load(tmp_path / "o.npy"), want, rtol=0, atol=1e-13)


def test_compare_exit_codes(exe, tmp_path):
    q, k, v = inputs(12, (1, 2, 16, 8), (1, 2, 16, 8))
    o, _ = attention(q, k, v)
    good, bad = o.astype(np.float16), o.astype(np.float16)
    bad[0, 0, 3, 2] = -bad[0, 0, 3, 2] + np.float16(0.5)
    p = save(tmp_path, q=q, k=k, v=v, good=good, bad=bad, short=good[:, :, :8])
    common = ["compare", "--q", p["q"], "--k", p["k"], "--v", p["v"], "--recipe", "fp16"]
    assert run(exe, *common, "--candidate", p["good"]).returncode == 0
    r = run(exe, *common, "--candidate", p["bad"], "--report", tmp_path / "rep")
    assert r.returncode == 1 and "O[0,0,3,2]" in r.stdout
    assert (tmp_path / "rep" / "compare.md").exists() and (tmp_path / "rep" / "compare.json").exists()
    r = run(exe, *common, "--candidate", p["short"])
    assert r.returncode == 2 and "short.npy" in r.stderr and "expected shape (1, 2, 16, 8)" in r.stderr


def test_malformed_npy_is_refused_naming_file_and_problem(exe, tmp_path):
    q, k, v = inputs(13, (1, 1, 4, 8), (1, 1, 4, 8))
    p = save(tmp_path, q=q, k=k, v=v)
    truncated = tmp_path / "truncated.npy"
    truncated.write_bytes(p["k"].read_bytes()[:-10])
    r = run(exe, "reference", "--q", p["q"], "--k", truncated, "--v", p["v"], "--out", tmp_path / "o.npy")
    assert r.returncode == 2
    assert "truncated.npy" in r.stderr and "truncated" in r.stderr
    complex_k = tmp_path / "complex.npy"
    np.save(complex_k, k.astype(np.complex64))
    r = run(exe, "reference", "--q", p["q"], "--k", complex_k, "--v", p["v"], "--out", tmp_path / "o.npy")
    assert r.returncode == 2 and "complex.npy" in r.stderr and "unsupported dtype '<c8'" in r.stderr
    wrong_d = tmp_path / "wrong_d.npy"
    np.save(wrong_d, np.zeros((1, 1, 4, 7), dtype=np.float16))
    r = run(exe, "reference", "--q", p["q"], "--k", wrong_d, "--v", p["v"], "--out", tmp_path / "o.npy")
    assert r.returncode == 2 and "different head dims" in r.stderr


def test_fortran_order_arrays_are_read_correctly(exe, tmp_path):
    q, k, v = inputs(14, (1, 2, 6, 4), (1, 2, 5, 4))
    p = save(tmp_path, q=np.asfortranarray(q), k=k, v=np.asfortranarray(v))
    r = run(exe, "reference", "--q", p["q"], "--k", p["k"], "--v", p["v"], "--out", tmp_path / "o.npy")
    assert r.returncode == 0, r.stderr
    np.testing.assert_allclose(np.load(tmp_path / "o.npy"), attention(q, k, v)[0], rtol=0, atol=1e-12)
