"""flashcheck.assert_attention_close on numpy arrays: a correct fp16 attention passes, a wrong one is
caught with a readable message naming the worst element and the report."""
import os

import numpy as np
import pytest

import flashcheck


def attention(q, k, v, causal_top_left=False):
    """Plain float64 attention; the result rounded to the inputs' dtype is a good kernel's output."""
    q64, k64, v64 = (x.astype(np.float64) for x in (q, k, v))
    g = q.shape[1] // k.shape[1]
    k64, v64 = np.repeat(k64, g, axis=1), np.repeat(v64, g, axis=1)
    s = q64 @ k64.swapaxes(-1, -2) / np.sqrt(q.shape[-1])
    if causal_top_left:
        nq, nk = s.shape[-2:]
        s = np.where(np.tril(np.ones((nq, nk), dtype=bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    lse = np.log(p.sum(-1)) + s.max(-1)
    return (p / p.sum(-1, keepdims=True)) @ v64, lse


def inputs(seed, shape_q=(1, 2, 40, 32), shape_kv=(1, 1, 57, 32), dtype=np.float16):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape_q).astype(dtype), rng.standard_normal(shape_kv).astype(dtype),
            rng.standard_normal(shape_kv).astype(dtype))


def test_correct_fp16_output_passes(exe, tmp_path):
    q, k, v = inputs(1)
    o, lse = attention(q, k, v)
    r = flashcheck.assert_attention_close(q, k, v, o.astype(np.float16), lse=lse, report_dir=str(tmp_path))
    assert r.passed and r.exit_code == 0
    assert r.report["verdict"] == "within budget"
    assert os.path.exists(tmp_path / "compare.md")


def test_causal_top_left_and_recipe_from_dtype(exe, tmp_path):
    q, k, v = inputs(2, (2, 2, 33, 16), (2, 2, 65, 16))
    o, _ = attention(q, k, v, causal_top_left=True)
    flashcheck.assert_attention_close(q, k, v, o.astype(np.float16), mask="causal-top-left", report_dir=str(tmp_path))


def test_wrong_output_is_caught_with_a_readable_message(exe, tmp_path):
    q, k, v = inputs(3)
    o, _ = attention(q, k, v)
    bad = o.astype(np.float16)
    bad[0, 1, 7, 5] += np.float16(0.02)  # one element off by ~40 fp16 ulps
    with pytest.raises(AssertionError) as err:
        flashcheck.assert_attention_close(q, k, v, bad, recipe="fp16", report_dir=str(tmp_path))
    msg = str(err.value)
    assert "outside flashcheck's error budget" in msg
    assert "VIOLATES THE BUDGET" in msg
    assert "O[0,1,7,5]" in msg and "VIOLATION" in msg
    assert str(tmp_path / "compare.md") in msg
    print(msg)


def test_masking_the_wrong_keys_is_caught(exe, tmp_path):
    q, k, v = inputs(4, (1, 1, 20, 16), (1, 1, 20, 16))
    o, _ = attention(q, k, v, causal_top_left=False)  # forgot the mask
    r = flashcheck.compare(q, k, v, o.astype(np.float16), mask="causal-top-left", report_dir=str(tmp_path))
    assert not r.passed and r.exit_code == 1
    assert r.report["results"][0]["violations"] > 0
    assert r.worst[0]["violation"]


def test_values_not_in_the_recipe_format_are_bad_input_not_a_verdict(exe, tmp_path):
    rng = np.random.default_rng(5)
    q, k, v = (rng.standard_normal((1, 1, 8, 8)) for _ in range(3))  # float64 values, not fp16 values
    o, _ = attention(q, k, v)
    with pytest.raises(flashcheck.FlashcheckError, match="is not a fp16 value"):
        flashcheck.assert_attention_close(q, k, v, o, recipe="fp16", report_dir=str(tmp_path))


def test_temporary_folders_go_unless_the_output_fails(exe, tmp_path, monkeypatch):
    # Without report_dir, compare() works in a temporary folder: removed after a pass, kept (and named)
    # after a violation, so a test suite calling it thousands of times leaves nothing behind.
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    q, k, v = inputs(6)
    o, _ = attention(q, k, v)
    r = flashcheck.compare(q, k, v, o.astype(np.float16))
    assert r.passed and r.report_dir is None and r.report["verdict"] == "within budget"
    assert list(tmp_path.iterdir()) == []
    bad = o.astype(np.float16)
    bad[0, 0, 0, 0] += np.float16(0.5)
    r = flashcheck.compare(q, k, v, bad)
    assert not r.passed and r.report_dir is not None
    assert [p.name for p in tmp_path.iterdir()] == [os.path.basename(r.report_dir)]
    assert os.path.exists(os.path.join(r.report_dir, "compare.md"))
    with pytest.raises(flashcheck.FlashcheckError):
        flashcheck.compare(q, k, v, bad[..., :-1])  # a wrong shape: bad input, and its folder goes too
    assert len(list(tmp_path.iterdir())) == 1
