# test_streams.py — cairn.open: streams as Python file objects, through numpy.save/load, pickle and
# json, between two processes; an exception in a writer's with block commits nothing.
import json
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

import cairn


def test_numpy_and_pickle_across_processes(pool_dir):
    uri = "pmem:" + os.path.join(pool_dir, "run.pool") + "#field"
    writer = (
        "import sys, pickle, numpy as np, cairn\n"
        "with cairn.open(sys.argv[1], 'wb') as f:\n"
        "    np.save(f, np.arange(1000.0).reshape(10, 100))\n"
        "    pickle.dump({'step': 12, 'name': 'heat'}, f)\n"
    )
    subprocess.run([sys.executable, "-c", writer, uri], check=True)
    with cairn.open(uri, "rb") as f:
        a = np.load(f)
        meta = pickle.load(f)
        view = f.view()
        assert view.nbytes == f.tell() and not view.flags.writeable
    assert a.shape == (10, 100) and a[9, 99] == 999.0
    assert meta == {"step": 12, "name": "heat"}
    assert bytes(view[:6]) == b"\x93NUMPY"
    del view


def test_text_json_and_abandon(pool_dir):
    uri = "pmem:" + os.path.join(pool_dir, "run.pool") + "#cfg"
    with cairn.open(uri, "w") as f:
        json.dump({"n": 64, "dt": 0.1}, f)
    with pytest.raises(KeyError):
        with cairn.open(uri, "w") as f:
            f.write("half a version")
            raise KeyError("the writer fails")
    with cairn.open(uri, "r") as f:
        assert json.load(f) == {"n": 64, "dt": 0.1}  # the abandoned version was never committed
    with cairn.open("mem:lines", "wb") as f:
        f.write(b"a\nbb\nccc")
    with cairn.open("mem:lines", "rb") as f:
        assert f.readlines() == [b"a\n", b"bb\n", b"ccc"]


def test_stream_errors(pool_dir):
    pool = os.path.join(pool_dir, "run.pool")
    with cairn.open("pmem:" + pool + "#a", "wb") as f:
        f.write(b"x")
    with pytest.raises(cairn.NotFoundError):
        cairn.open("pmem:" + pool + "#never", "rb")
    with pytest.raises(cairn.InvalidArgumentError):
        cairn.open("pmem:" + pool + "#a", "a")
    w = cairn.open("pmem:" + pool + "#b", "wb")
    with pytest.raises(cairn.BusyError):
        cairn.open("pmem:" + pool + "#b", "wb")
    w.close()
