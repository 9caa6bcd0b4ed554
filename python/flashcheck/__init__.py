"""flashcheck from Python: hold an attention output to flashcheck's error budget.

    import flashcheck
    flashcheck.assert_attention_close(q, k, v, out, recipe="bf16", mask="causal-top-left")

q (B, Hq, Nq, d), k (B, Hkv, Nk, d), v (B, Hkv, Nk, dv) and out (B, Hq, Nq, dv) are numpy arrays or
torch tensors (any device; they are copied to the host). The inputs must already be in the recipe's
input format (a bf16 tensor, or float values that are bf16 values): flashcheck computes the exact
attention of exactly these values. The arrays are written as NPY files and `flashcheck compare` holds
every element of `out` to its a-priori error bound; on a violation this raises AssertionError with the
worst elements and the path of the report (compare.md, compare.json).

Pure Python, numpy only. The flashcheck executable is found through the `flashcheck=` argument, the
FLASHCHECK_EXE environment variable, or PATH.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from typing import Any, Optional, Sequence

import numpy as np

__all__ = ["assert_attention_close", "compare", "reference", "CompareResult", "FlashcheckError", "find_executable"]

# PyTorch dtypes and the recipe they mean when recipe= is not given.
_TORCH_RECIPES = {"torch.float16": "fp16", "torch.bfloat16": "bf16", "torch.float32": "fp32"}


class FlashcheckError(RuntimeError):
    """flashcheck could not check the output (bad input, missing executable): not a verdict."""


@dataclass
class CompareResult:
    passed: bool
    exit_code: int
    stdout: str
    stderr: str
    report_dir: Optional[str]  # None when the temporary folder was removed (a passing compare)
    report: Optional[dict]

    @property
    def worst(self) -> list:
        if not self.report:
            return []
        return self.report["results"][0].get("worst", [])


def find_executable(flashcheck: Optional[str] = None) -> str:
    exe = flashcheck or os.environ.get("FLASHCHECK_EXE") or shutil.which("flashcheck")
    if not exe or not os.path.exists(exe):
        raise FlashcheckError("flashcheck executable not found: pass flashcheck=..., set FLASHCHECK_EXE, or put it on PATH")
    return exe


def _to_numpy(x: Any, name: str) -> np.ndarray:
    """A float64 host array holding exactly the values of x (bf16 has no numpy dtype: go through float32)."""
    if hasattr(x, "detach") and hasattr(x, "cpu"):  # a torch tensor, without importing torch
        t = x.detach().cpu()
        if str(t.dtype) in ("torch.bfloat16", "torch.float16"):
            t = t.float()
        return t.double().numpy()
    a = np.asarray(x)
    if a.dtype.kind != "f":
        raise FlashcheckError(f"{name}: expected a floating-point array, got dtype {a.dtype}")
    return a.astype(np.float64)


def _recipe_for(x: Any, recipe: Optional[str]) -> str:
    if recipe:
        return recipe
    dtype = str(getattr(x, "dtype", ""))
    if dtype in _TORCH_RECIPES:
        return _TORCH_RECIPES[dtype]
    if dtype == "float16":
        return "fp16"
    if dtype == "float32":
        return "fp32"
    raise FlashcheckError(f"cannot infer the recipe from dtype {dtype!r}: pass recipe=")


def _format_for(x: Any) -> str:
    """The input format the values of x are in: the dtype's, or fp64 for float64 arrays."""
    dtype = str(getattr(x, "dtype", ""))
    return {"torch.bfloat16": "bf16", "torch.float16": "fp16", "torch.float32": "fp32", "float16": "fp16",
            "float32": "fp32"}.get(dtype, "fp64")


def _save_inputs(d: str, q, k, v, key_lengths) -> list:
    args = []
    for name, x in (("q", q), ("k", k), ("v", v)):
        path = os.path.join(d, f"{name}.npy")
        np.save(path, _to_numpy(x, name))
        args += [f"--{name}", path]
    if key_lengths is not None:
        path = os.path.join(d, "key_lengths.npy")
        kl = key_lengths.detach().cpu().numpy() if hasattr(key_lengths, "detach") else np.asarray(key_lengths)
        np.save(path, kl.astype(np.int64))
        args += ["--key-lengths", path]
    return args


def _mask_args(mask: str, scale: Optional[float]) -> list:
    args = ["--mask", mask]
    if scale is not None:
        args += ["--scale", repr(float(scale))]
    return args


def compare(q, k, v, out, *, recipe: Optional[str] = None, mask: str = "none", lse=None, scale: Optional[float] = None,
            key_lengths=None, report_dir: Optional[str] = None, flashcheck: Optional[str] = None,
            worst: int = 8, extra_args: Sequence[str] = ()) -> CompareResult:
    """Runs `flashcheck compare` and returns its verdict without raising on a violation.

    Without report_dir the inputs and the report go to a temporary folder, removed again unless the
    output violates the budget (then it is kept for inspection, and result.report_dir names it)."""
    exe = find_executable(flashcheck)
    recipe = _recipe_for(q, recipe)
    own_dir = report_dir is None
    report_dir = report_dir or tempfile.mkdtemp(prefix="flashcheck-compare-")
    keep = not own_dir
    try:
        os.makedirs(report_dir, exist_ok=True)
        inputs = os.path.join(report_dir, "inputs")
        os.makedirs(inputs, exist_ok=True)
        args = [exe, "compare"] + _save_inputs(inputs, q, k, v, key_lengths) + _mask_args(mask, scale)
        cand = os.path.join(inputs, "candidate.npy")
        np.save(cand, _to_numpy(out, "out"))
        args += ["--candidate", cand, "--recipe", recipe, "--report", report_dir, "--worst", str(worst)]
        if lse is not None:
            lse_path = os.path.join(inputs, "candidate_lse.npy")
            np.save(lse_path, _to_numpy(lse, "lse"))
            args += ["--candidate-lse", lse_path]
        args += list(extra_args)
        p = subprocess.run(args, capture_output=True, text=True)
        if p.returncode not in (0, 1):
            raise FlashcheckError(f"flashcheck compare failed (exit {p.returncode}): {p.stderr.strip() or p.stdout.strip()}")
        report = None
        json_path = os.path.join(report_dir, "compare.json")
        if os.path.exists(json_path):
            with open(json_path) as f:
                report = json.load(f)
        keep = keep or p.returncode != 0
        return CompareResult(p.returncode == 0, p.returncode, p.stdout, p.stderr, report_dir if keep else None, report)
    finally:
        if not keep:
            shutil.rmtree(report_dir, ignore_errors=True)


def assert_attention_close(q, k, v, out, *, recipe: Optional[str] = None, mask: str = "none", lse=None,
                           scale: Optional[float] = None, key_lengths=None, report_dir: Optional[str] = None,
                           flashcheck: Optional[str] = None, worst: int = 8) -> CompareResult:
    """Raises AssertionError when any element of out (or lse) is outside flashcheck's error budget.

    mask: none | causal (bottom-right) | causal-top-left (PyTorch's is_causal) | window:L,R | window-top-left:L,R.
    recipe: fp32 | tf32 | fp16 | bf16 | fp8_e4m3 | fp8_e5m2 (default: from q's dtype).
    """
    r = compare(q, k, v, out, recipe=recipe, mask=mask, lse=lse, scale=scale, key_lengths=key_lengths,
                report_dir=report_dir, flashcheck=flashcheck, worst=worst)
    if not r.passed:
        raise AssertionError("attention output outside flashcheck's error budget\n" + r.stdout.rstrip())
    return r


def reference(q, k, v, *, mask: str = "none", scale: Optional[float] = None, key_lengths=None,
              input_format: Optional[str] = None, precision: str = "float64", flashcheck: Optional[str] = None):
    """The exact attention (float64 O and natural-log LSE) of the given inputs, via `flashcheck reference`."""
    exe = find_executable(flashcheck)
    with tempfile.TemporaryDirectory(prefix="flashcheck-reference-") as d:
        args = [exe, "reference"] + _save_inputs(d, q, k, v, key_lengths) + _mask_args(mask, scale)
        fmt = input_format or _format_for(q)
        args += ["--format", fmt, "--precision", precision, "--out", os.path.join(d, "o.npy"), "--lse", os.path.join(d, "lse.npy")]
        p = subprocess.run(args, capture_output=True, text=True)
        if p.returncode != 0:
            raise FlashcheckError(f"flashcheck reference failed (exit {p.returncode}): {p.stderr.strip()}")
        return np.load(os.path.join(d, "o.npy")), np.load(os.path.join(d, "lse.npy"))
