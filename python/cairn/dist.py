"""cairn.dist — many MPI ranks, one version, from Python with mpi4py.

Every rank of an mpi4py communicator persists its part of the state with a
persist strategy; Context.commit() is collective and makes the iteration
global; after any failure Context.restore() gives every rank the same global
version, never a mix of iterations (C++: cairn::dist, include/cairn/dist.hpp).

    from mpi4py import MPI
    import cairn, cairn.dist

    with cairn.dist.Context(MPI.COMM_WORLD, "heat", strategy="in-place") as ctx:
        u = ctx.dual_region("u", (rows, n))     # this rank's rows: u.read, u.write
        ctx.open()                              # collective
        try:
            start = ctx.restore()               # collective: the global version
        except cairn.NoVersionError:
            start = 0                           # fresh start
            u.read[:] = initial
        for it in range(start, steps):
            ctx.begin()
            step(u.read, u.write)               # every element of u.write
            ctx.commit()                        # collective: global when it returns

Run under `cairn launch -n N -- python3 app.py`, which relaunches the job
(with --resume appended) when a rank dies. A fresh job must start on empty
storage: remove_storage(rank, size, ...) first, as a relaunch must not.
Available where the build found MPI and mpi4py (cairn.dist_available());
importing it elsewhere raises ImportError.
"""

from cairn import dist_available as _dist_available

if not _dist_available():
    raise ImportError("cairn.dist: this build of cairn has no MPI part (MPI or mpi4py was not found when it was built)")

from mpi4py import MPI as _MPI  # noqa: F401,E402  (initialises MPI before any Context)

from cairn._cairn._dist import Context, DualRegion, Region, remove_storage  # noqa: E402

__all__ = ["Context", "DualRegion", "Region", "remove_storage"]
