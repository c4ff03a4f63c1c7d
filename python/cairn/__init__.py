"""cairn — persistent-memory versioning of simulation state, from Python.

A loop made resilient in four lines: register the arrays that must survive,
open, restore if an earlier run committed, commit every iteration.

    import numpy as np, cairn

    with cairn.Context("heat", strategy="in-place") as ctx:
        u = ctx.dual_region("u", (n, n))           # u.read, u.write: numpy arrays
        it = ctx.region("it", 1, np.int64)         # it.array
        ctx.open()
        if ctx.committed_version is None:
            u.read[:] = initial; it.array[0] = 0
        else:
            ctx.restore()                          # bit for bit the last commit
        while it.array[0] < steps:
            step(u.read, u.write)                  # write all of u.write
            it.array[0] += 1
            ctx.commit()                           # durable; u.read and u.write swap

The arrays ARE the persistent memory (no copy at commit or restore) and stay
the same objects at the same addresses across restore. Every strategy of
cairn.strategies() is reached by name; failures raise a subclass of
cairn.Error, one per error code (cairn.CorruptedError, cairn.NoVersionError,
...), carrying the library's message.

Streams: cairn.open("pmem:POOL#name", "wb") is a binary file object (text
with "w"/"r") that numpy.save, numpy.load, pickle and json use unchanged;
closing a writer commits its bytes as one version.
"""

import io as _io

from cairn._cairn import (  # noqa: F401  (re-exported)
    AlreadyExistsError,
    BusyError,
    Context,
    CorruptedError,
    DeviceFullError,
    DualRegion,
    Error,
    ForeignFileError,
    InvalidArgumentError,
    IoError,
    IsDirectoryError,
    LayoutMismatchError,
    NoVersionError,
    NotFoundError,
    NotReadyError,
    OutOfSpaceError,
    PermissionDeniedError,
    PoisonedError,
    Region,
    TooSmallError,
    TruncatedError,
    UnsupportedError,
    WrongVersionError,
    _Stream,
    strategies,
)

__all__ = [
    "Context", "Region", "DualRegion", "strategies", "open", "StreamFile", "Error",
    "InvalidArgumentError", "NotFoundError", "PermissionDeniedError", "IsDirectoryError", "TooSmallError",
    "TruncatedError", "ForeignFileError", "WrongVersionError", "CorruptedError", "OutOfSpaceError",
    "DeviceFullError", "AlreadyExistsError", "IoError", "PoisonedError", "NotReadyError", "LayoutMismatchError",
    "NoVersionError", "UnsupportedError", "BusyError",
]


class StreamFile(_io.RawIOBase):
    """A cairn stream as a binary file object (what cairn.open returns for "rb"/"wb").

    A writer commits its bytes as one version at close(); leaving a with block
    by an exception abandons them instead (the previous version stays). A
    reader reads the last committed version; view() is that version in place,
    a read-only numpy uint8 array, without a copy.
    """

    def __init__(self, stream):
        super().__init__()
        self._s = stream
        self._abandon = False

    @property
    def name(self):
        return self._s.uri

    def readable(self):
        return not self._s.writer

    def writable(self):
        return self._s.writer

    def seekable(self):
        return True

    def readinto(self, b):
        return self._s.readinto(b)

    def readline(self, size=-1):
        return self._s.readline(-1 if size is None else size)

    def write(self, b):
        if self._abandon:
            return len(memoryview(b))
        return self._s.write(b)

    def seek(self, offset, whence=_io.SEEK_SET):
        return self._s.seek(offset, whence)

    def tell(self):
        return self._s.tell()

    def flush(self):
        if not self.closed and not self._abandon and self._s.writer:
            self._s.flush()

    def view(self):
        """The committed bytes in place (readers): a read-only numpy uint8 array."""
        return self._s.view()

    def abandon(self):
        """Writers: drop what was written and commit nothing; closes the file."""
        self._abandon = True
        self.close()

    def close(self):
        if self.closed:
            return
        try:
            if self._abandon:
                self._s.abandon()
            else:
                self._s.close()
        finally:
            super().close()

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None:
            self._abandon = True
        self.close()


class _TextStream(_io.TextIOWrapper):
    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None:
            self.buffer._abandon = True
        self.close()


def open(uri, mode="rb", *, size_hint=0, wait=0.0, encoding="utf-8"):  # noqa: A001  (as io.open)
    """Opens a cairn stream as a file object.

    uri: "pmem:POOL#NAME" (a stream in a pool file, shared by every process),
    "mem:NAME" (this process's memory) or "file:PATH"; a name without a scheme
    is prefixed with $CAIRN_STREAM_PREFIX, else read as file:NAME.
    mode: "rb"/"wb" give a StreamFile, "r"/"w" a text file over it.
    size_hint: bytes to reserve for a writer; wait: seconds a reader waits for
    a first commit. Failures raise a subclass of cairn.Error.
    """
    if mode not in ("r", "w", "rb", "wb", "rt", "wt"):
        raise InvalidArgumentError(f"mode {mode!r}: one of 'rb', 'wb', 'r', 'w'")
    raw = StreamFile(_Stream(uri, mode[0], size_hint, wait))
    if "b" in mode:
        return raw
    return _TextStream(raw, encoding=encoding)
