import os
import pathlib

import pytest


@pytest.fixture
def runfile():
    """Absolute path of a runfile named by one of the env vars the BUILD target sets."""

    def resolve(var: str) -> pathlib.Path:
        path = pathlib.Path(os.environ[var])
        assert path.exists(), f"{var}={path} does not exist"
        return path

    return resolve
