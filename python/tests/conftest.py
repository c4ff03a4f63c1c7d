# conftest.py — fixtures of the cairn package's tests: a fresh pool directory per test.
import os
import shutil
import tempfile

import pytest


@pytest.fixture
def pool_dir():
    base = os.environ.get("CAIRN_TEST_DIR", "/dev/shm")
    if not os.path.isdir(base):
        base = tempfile.gettempdir()
    d = tempfile.mkdtemp(prefix="cairn-py-", dir=base)
    yield d
    shutil.rmtree(d, ignore_errors=True)
