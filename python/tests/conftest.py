import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import flashcheck  # noqa: E402


@pytest.fixture(scope="session")
def exe():
    try:
        return flashcheck.find_executable()
    except flashcheck.FlashcheckError as e:
        pytest.skip(str(e))
