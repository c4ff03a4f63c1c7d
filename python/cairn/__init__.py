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

The PM-octree in bulk: cairn.Octree, whose leaves (coordinates, levels,
payloads) come out as numpy arrays and whose refine and coarsen take boolean
masks over the leaves; every loop over leaves runs in C++.

MPI: cairn.dist (an mpi4py communicator, the collective commit and the
restore of the global version), where the build found MPI and mpi4py:
cairn.dist_available().
"""

import io as _io
from typing import NamedTuple as _NamedTuple

import numpy as _np

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
    MAX_LEVEL,
    _Octree,
    _Stream,
    dist_available,
    strategies,
)

__all__ = [
    "Context", "Region", "DualRegion", "strategies", "open", "StreamFile", "Octree", "Leaves", "MAX_LEVEL",
    "dist_available", "Error",
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


class Leaves(_NamedTuple):
    """An octree's leaves in their (Morton) order, as copies.

    coords: (n, dims) uint32, each leaf's lower corner in units of the finest
    octant (the domain is [0, 2**MAX_LEVEL) along each axis); levels: (n,)
    uint8; payloads: (n, payload_size) uint8, or (n, ...) of the tree's
    payload dtype.
    """

    coords: _np.ndarray
    levels: _np.ndarray
    payloads: _np.ndarray


def _payload_dtype(payload):
    if isinstance(payload, (int, _np.integer)) and not isinstance(payload, bool):
        if payload < 0:
            raise InvalidArgumentError(f"payload size {payload}: not negative")
        return None, int(payload)
    dt = _np.dtype(payload)
    return dt, dt.itemsize


class Octree:
    """The PM-octree (C++: cairn::octree::Octree) from Python, in bulk.

    An adaptive quadtree (dims=2) or octree (dims=3) whose working version
    lives in DRAM and a pool file and whose last persisted version survives
    any crash. Every octant carries a payload of a fixed size: `payload` is a
    byte count (payloads are then uint8 rows) or a numpy dtype (float64, a
    structured dtype, np.dtype((np.float32, 4)), ...).

        t = cairn.Octree.create("/dev/shm/mesh.pool", dims=2, payload=np.float64)
        t.uniform(3)                                    # 64 leaves
        c, lv, p = t.leaves()                           # numpy arrays, leaves in Morton order
        t.write_payloads(np.sin(c[:, 0] / 2**cairn.MAX_LEVEL))
        t.refine(t.payloads() > 0.5)                    # one boolean per leaf
        t.balance()
        v = t.persist()                                 # the new version: durable
        ...
        t = cairn.Octree.open("/dev/shm/mesh.pool", dims=2, payload=np.float64)   # after a crash

    No per-leaf Python callback anywhere: leaves(), payloads(),
    write_payloads(), refine(mask), coarsen(mask) and balance() each run one
    C++ loop (the bulk cursor and the bulk writer of octree.hpp). New
    octants take their parent's payload; a coarsened parent takes its first
    child's. Errors raise a subclass of cairn.Error: a damaged pool
    CorruptedError (from open or from the first operation that reads the
    damage), a mask of the wrong length InvalidArgumentError. One thread at a
    time per tree (its calls run without the GIL, as the C++ tree is not
    thread-safe).
    """

    def __init__(self, tree, dtype):
        self._t = tree
        self._dtype = dtype

    @classmethod
    def create(cls, path, dims=3, payload=0, *, pool_size=1 << 30, keep_previous=False, first_version=1,
               dram_budget=256 << 20):
        """A new tree in a new pool file at `path` (AlreadyExistsError if it exists): one root octant,
        payload zero. Nothing is persistent until persist()."""
        dt, size = _payload_dtype(payload)
        return cls(_Octree.create(path, dims, size, pool_size, keep_previous, first_version, dram_budget), dt)

    @classmethod
    def open(cls, path, dims=3, payload=0, *, version=0, background_gc=True, dram_budget=256 << 20):
        """The last persisted version of the tree in `path` (or `version`, with keep_previous). dims and the
        payload's size must be those it was created with (LayoutMismatchError)."""
        dt, size = _payload_dtype(payload)
        return cls(_Octree.open(path, dims, size, version, background_gc, dram_budget), dt)

    @staticmethod
    def remove(path):
        """Removes the pool file of a tree (both versions)."""
        _Octree.remove(path)

    def _payloads(self, raw):
        if self._dtype is None:
            return raw
        return raw.reshape(-1).view(self._dtype)

    def leaves(self):
        """Every leaf in Morton order: Leaves(coords, levels, payloads), copies (the tree may change)."""
        c, lv, p = self._t.leaves(True, True)
        return Leaves(c, lv, self._payloads(p))

    def payloads(self):
        """The leaves' payloads alone, in their order (a copy)."""
        return self._payloads(self._t.leaves(False, True)[2])

    def write_payloads(self, values):
        """Sets every leaf's payload, in their order: values has one payload per leaf (of the payload dtype,
        or payload_size bytes per leaf). Blocks the last version shares are copied once, in one pass."""
        dt = self._dtype if self._dtype is not None else _np.uint8
        a = _np.ascontiguousarray(values, dtype=dt)
        self._t.write_payloads(a.reshape(-1).view(_np.uint8))

    def refine(self, mask, max_level=MAX_LEVEL):
        """Splits every leaf whose mask entry is True (one bool per leaf, in their order) into its 2**dims
        children, up to max_level; returns how many leaves were split. Not recursive."""
        return self._t.refine(_np.asarray(mask), max_level)

    def coarsen(self, mask):
        """Replaces every family of 2**dims sibling leaves that are all True in the mask by their parent;
        returns how many families were. Not recursive."""
        return self._t.coarsen(_np.asarray(mask))

    def uniform(self, level):
        """Refines every leaf to `level` (a uniform mesh)."""
        self._t.uniform(level)

    def balance(self, connect="face"):
        """2:1 balance: refines until leaves sharing a face ("full": a face, edge or corner) differ by at
        most one level."""
        self._t.balance(connect)

    def persist(self):
        """Makes the working version the persistent one (cost: what changed since the last persist);
        returns its version number."""
        return self._t.persist()

    def checksum(self):
        """A 64-bit checksum of every leaf's octant and payload, in order."""
        return self._t.checksum()

    @property
    def root_payload(self):
        """The root octant's payload (internal once refined: free for a step counter); a copy."""
        raw = _np.frombuffer(self._t.root_payload(), _np.uint8)
        return raw if self._dtype is None else raw.view(self._dtype)

    @root_payload.setter
    def root_payload(self, value):
        dt = self._dtype if self._dtype is not None else _np.uint8
        self._t.set_root_payload(_np.ascontiguousarray(value, dtype=dt).reshape(-1).view(_np.uint8))

    def gc(self):
        """Collects the pool's garbage now."""
        self._t.gc()

    def verify(self):
        """Checks every stored block (CorruptedError names the first problem)."""
        self._t.verify()

    def __len__(self):
        return self._t.count()

    @property
    def dims(self):
        return self._t.dims

    @property
    def payload_size(self):
        return self._t.payload_size

    @property
    def payload_dtype(self):
        """The payload's dtype; None when the payload was given as a byte count."""
        return self._dtype

    @property
    def version(self):
        """The committed version (0: never persisted)."""
        return self._t.version

    @property
    def path(self):
        return self._t.path

    @property
    def closed(self):
        return self._t.closed

    def close(self):
        """Releases the tree (what was not persisted is lost)."""
        self._t.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
