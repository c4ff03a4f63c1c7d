"""heat_mpi.py — examples/heat.py's 2D heat loop at N ranks with mpi4py, persisted with cairn.dist.

    mpirun -n 2 python3 examples/heat_mpi.py [steps]          # a fresh job
    cairn launch -n 2 -- python3 examples/heat_mpi.py [steps]  # relaunched with --resume when a rank dies

Each rank holds N/size rows of the field in a cairn.dist dual region and
exchanges one ghost row with each neighbour per step; commit() is collective,
so after any failure every rank restores the same global version. It prints
heat.py's checksum line: the same checksum as heat.py for the same steps.
$CAIRN_STRATEGY picks the strategy, $CAIRN_POOL_DIR the directory.
"""
import os
import sys

import numpy as np
from mpi4py import MPI

import cairn
import cairn.dist

N = 128
args = [a for a in sys.argv[1:] if a != "--resume"]
steps = int(args[0]) if args else 200
comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
rows = N // size
if "--resume" not in sys.argv:
    cairn.dist.remove_storage(rank, size, "heat_mpi")  # a fresh job: an old job's versions would outrank ours
comm.Barrier()

with cairn.dist.Context(comm, "heat_mpi") as ctx:
    u = ctx.dual_region("u", (rows, N))  # this rank's rows, two versions
    ctx.open()
    try:
        start = ctx.restore()  # collective: the global version (= iterations done)
    except cairn.NoVersionError:
        start = 0
        u.read[:] = 0.0
        if rank == 0:
            u.read[0, :] = 1.0  # a hot edge
    e = np.empty((rows + 2, N))  # this rank's rows between two ghost rows
    up = rank - 1 if rank > 0 else MPI.PROC_NULL
    down = rank + 1 if rank + 1 < size else MPI.PROC_NULL
    r0, r1 = (1 if rank == 0 else 0), (rows - 1 if rank == size - 1 else rows)  # the domain's edges stay
    for it in range(start, steps):
        ctx.begin()
        a, b = u.read, u.write
        e[1:-1] = a
        comm.Sendrecv(a[0], dest=up, recvbuf=e[-1], source=down)
        comm.Sendrecv(a[-1], dest=down, recvbuf=e[0], source=up)
        b[:] = a
        c = e[r0 + 1 : r1 + 1, 1:-1]
        b[r0:r1, 1:-1] = c + 0.2 * (e[r0:r1, 1:-1] + e[r0 + 2 : r1 + 2, 1:-1] + e[r0 + 1 : r1 + 1, :-2] + e[r0 + 1 : r1 + 1, 2:] - 4 * c)
        ctx.commit()  # collective: durable on every rank from here
    parts = comm.gather(np.array(u.read), root=0)
    if rank == 0:
        whole = np.concatenate(parts)
        strategy = os.environ.get("CAIRN_STRATEGY") or "in-place"
        print(f"heat_mpi.py: {size} ranks, {strategy}, iterations {start}..{steps}, checksum {whole.sum():.15e}")
