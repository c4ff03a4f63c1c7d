# test_errors.py — one exception class per cairn error code, each carrying the library's message:
# a damaged, a missing and a foreign pool, another layout, streams that do not exist.
import os

import numpy as np
import pytest

import cairn

ALL = [
    "InvalidArgumentError", "NotFoundError", "PermissionDeniedError", "IsDirectoryError", "TooSmallError",
    "TruncatedError", "ForeignFileError", "WrongVersionError", "CorruptedError", "OutOfSpaceError",
    "DeviceFullError", "AlreadyExistsError", "IoError", "PoisonedError", "NotReadyError", "LayoutMismatchError",
    "NoVersionError", "UnsupportedError", "BusyError",
]


def test_one_class_per_code():
    codes = set()
    for name in ALL:
        cls = getattr(cairn, name)
        assert issubclass(cls, cairn.Error) and cls.__module__ == "cairn"
        codes.add(cls.code)
    assert codes == set(range(-19, 0))


def committed(pool_dir, strategy="in-place", pattern=None):
    with cairn.Context("s", strategy=strategy, dir=pool_dir) as ctx:
        r = ctx.region("r", 4096, np.uint8)
        ctx.open()
        r.array[:] = pattern if pattern is not None else 7
        ctx.commit()
        del r
    return os.path.join(pool_dir, "s.pool")


def reopen(pool_dir, strategy="in-place", size=4096):
    ctx = cairn.Context("s", strategy=strategy, dir=pool_dir)
    ctx.region("r", size, np.uint8)
    return ctx


def test_missing_pool_and_nothing_committed(pool_dir):
    with cairn.Context("s", dir=pool_dir) as ctx:  # storage is created on open
        ctx.region("r", 8)
        ctx.open()
        with pytest.raises(cairn.NoVersionError) as e:
            ctx.restore()
        assert "nothing has been committed" in e.value.message and str(e.value) == e.value.message
    with pytest.raises(cairn.NotFoundError) as e:
        cairn.open("pmem:" + os.path.join(pool_dir, "absent.pool") + "#x", "rb")
    assert isinstance(e.value, FileNotFoundError) and "absent.pool" in str(e.value)


def test_foreign_pool(pool_dir):
    with open(os.path.join(pool_dir, "s.pool"), "wb") as f:
        f.write(os.urandom(1 << 20))
    ctx = reopen(pool_dir)
    with pytest.raises(cairn.ForeignFileError) as e:
        ctx.open()
    assert "s.pool" in str(e.value)


def test_damaged_pool_header(pool_dir):
    path = committed(pool_dir)
    with open(path, "r+b") as f:  # both header copies (0 and 4 KiB), past the magic
        for copy in (0, 4096):
            f.seek(copy + 40)
            b = f.read(1)
            f.seek(copy + 40)
            f.write(bytes([b[0] ^ 0x10]))
    ctx = reopen(pool_dir)
    with pytest.raises(cairn.CorruptedError) as e:
        ctx.open()
    assert e.value.code == -9 and "s.pool" in str(e.value)


def test_damaged_payload(pool_dir):
    pattern = np.frombuffer(b"".join(b"cairn-payload-%05d|" % i for i in range(205))[:4096], np.uint8)
    path = committed(pool_dir, pattern=pattern)
    data = bytearray(open(path, "rb").read())
    needle = bytes(pattern[:64])
    at = data.find(needle)
    assert at >= 0
    while at >= 0:  # every copy of the region in the pool
        data[at + 20] ^= 0x01
        at = data.find(needle, at + 1)
    open(path, "wb").write(data)
    ctx = reopen(pool_dir)
    ctx.open()
    with pytest.raises(cairn.CorruptedError):
        ctx.restore()
        ctx.commit()  # in-place may check in the background: the next commit waits for it


def test_other_layout(pool_dir):
    committed(pool_dir)
    ctx = reopen(pool_dir, size=8192)
    with pytest.raises(cairn.LayoutMismatchError) as e:
        ctx.open()
    assert "registration layout" in str(e.value)
