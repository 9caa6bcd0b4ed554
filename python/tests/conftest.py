import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import flashcheck  # noqa: E402


@pytest.fixture(scope="session")
def exe():
    """The flashcheck executable. Without one the tests skip, except where one is required: ctest's
    entry sets FLASHCHECK_EXE, and CI sets CI; there a missing executable fails every test, so that a
    run which tested nothing cannot pass."""
    try:
        return flashcheck.find_executable()
    except flashcheck.FlashcheckError as e:
        if os.environ.get("FLASHCHECK_EXE") or os.environ.get("CI") or os.environ.get("FLASHCHECK_REQUIRE_EXE"):
            pytest.fail(f"{e} (required here: FLASHCHECK_EXE, CI or FLASHCHECK_REQUIRE_EXE is set)")
        pytest.skip(str(e))
