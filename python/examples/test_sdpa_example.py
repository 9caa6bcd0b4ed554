"""Example: hold PyTorch's scaled_dot_product_attention to flashcheck's error budget in a pytest suite.

Run on a machine with PyTorch (and a GPU for the fused backends):
    FLASHCHECK_EXE=/path/to/flashcheck PYTHONPATH=/path/to/flashcheck/python python3 -m pytest python/examples
Skipped where torch is absent; the GPU backends are skipped without CUDA.
"""
import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402

import flashcheck  # noqa: E402

CUDA = torch.cuda.is_available()
BACKENDS = [pytest.param(SDPBackend.MATH, id="math")] + [
    pytest.param(b, id=name, marks=pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU"))
    for name, b in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION),
                    ("efficient", SDPBackend.EFFICIENT_ATTENTION))]


@pytest.fixture(scope="module")
def exe():
    try:
        return flashcheck.find_executable()
    except flashcheck.FlashcheckError as e:
        pytest.skip(str(e))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("causal", [False, True], ids=["none", "causal"])
def test_sdpa_within_budget(exe, backend, dtype, causal, tmp_path):
    device = "cuda" if CUDA else "cpu"
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 4, 129, 64, device=device, dtype=dtype) for _ in range(3))
    try:
        with sdpa_kernel(backend):
            out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    except RuntimeError as e:
        pytest.skip(f"backend does not run this case: {str(e).splitlines()[0]}")
    # is_causal is top-left aligned in PyTorch; the recipe follows from the dtype (bf16 / fp16).
    flashcheck.assert_attention_close(q, k, v, out, mask="causal-top-left" if causal else "none",
                                      report_dir=str(tmp_path))


def test_a_wrong_kernel_is_caught(exe, tmp_path):
    device = "cuda" if CUDA else "cpu"
    torch.manual_seed(1)
    q, k, v = (torch.randn(1, 2, 64, 64, device=device, dtype=torch.bfloat16) for _ in range(3))
    wrong = F.scaled_dot_product_attention(q, k, v, scale=0.1)  # not the 1/sqrt(d) it is checked against
    with pytest.raises(AssertionError, match="outside flashcheck's error budget"):
        flashcheck.assert_attention_close(q, k, v, wrong, report_dir=str(tmp_path))
