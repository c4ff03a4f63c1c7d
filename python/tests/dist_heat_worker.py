"""dist_heat_worker.py — the tests' MPI job: examples/heat.py's 2D heat loop with its rows split over
the ranks of MPI.COMM_WORLD, persisted with cairn.dist (collective commit every iteration).

    mpirun -n 2 python3 dist_heat_worker.py N STEPS KILL_AT DIR [--resume]

A fresh job (no --resume) removes what an earlier job stored first. With KILL_AT > 0 and no
--resume, rank 1 writes half of iteration KILL_AT, prints "progress rank=1 pid=P step=KILL_AT" and
waits for a signal (the test SIGKILLs it on that line: no sleep decides where the kill lands).
Rank 0 ends with "start G done D" (the global version it resumed at, the iterations done), "sha256 H" of the whole field
gathered from the ranks, and heat.py's checksum line.
"""
import hashlib
import os
import signal
import sys

import numpy as np
from mpi4py import MPI

import cairn
import cairn.dist

args = [a for a in sys.argv[1:] if a != "--resume"]
resume = "--resume" in sys.argv[1:]
n, steps, kill_at, pool_dir = int(args[0]), int(args[1]), int(args[2]), args[3]
comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
rows = n // size
lo = rank * rows  # first global row of this rank
if not resume:
    cairn.dist.remove_storage(rank, size, "heat", "in-place", pool_dir)
comm.Barrier()

with cairn.dist.Context(comm, "heat", strategy="in-place", dir=pool_dir, threads=1) as ctx:
    u = ctx.dual_region("u", (rows, n))
    done = ctx.region("done", 1, np.int64)  # iterations done: a plain region, carried over by begin()
    ctx.open()
    try:
        start = ctx.restore()
    except cairn.NoVersionError:
        start = 0
        done.array[0] = 0
        u.read[:] = 0.0
        if rank == 0:
            u.read[0, :] = 1.0
    ext = np.empty((rows + 2, n))  # this rank's rows between a ghost row above and below
    up, down = (rank - 1 if rank > 0 else MPI.PROC_NULL), (rank + 1 if rank + 1 < size else MPI.PROC_NULL)
    r0, r1 = (1 if rank == 0 else 0), (rows - 1 if rank == size - 1 else rows)  # rows updated (not the edges)
    for it in range(start, steps):
        ctx.begin()
        done.array[0] += 1  # after begin(): the copy in the lane being written
        a, b = u.read, u.write
        ext[1:-1] = a
        comm.Sendrecv(a[0], dest=up, recvbuf=ext[-1], source=down)
        comm.Sendrecv(a[-1], dest=down, recvbuf=ext[0], source=up)
        b[:] = a
        e = ext
        b[r0:r1, 1:-1] = e[r0 + 1 : r1 + 1, 1:-1] + 0.2 * (
            e[r0 : r1, 1:-1] + e[r0 + 2 : r1 + 2, 1:-1] + e[r0 + 1 : r1 + 1, :-2] + e[r0 + 1 : r1 + 1, 2:]
            - 4 * e[r0 + 1 : r1 + 1, 1:-1]
        )
        if not resume and rank == 1 and it + 1 == kill_at:
            b[: rows // 2] = -1.0  # half of the iteration overwritten with garbage
            print(f"progress rank=1 pid={os.getpid()} step={kill_at}", flush=True)
            while True:
                signal.pause()
        ctx.commit()
    field = comm.gather(np.array(u.read), root=0)
    if rank == 0:
        whole = np.concatenate(field)
        print("start", start, "done", int(done.array[0]), flush=True)
        print("sha256", hashlib.sha256(whole.tobytes()).hexdigest(), flush=True)
        print(f"heat.py: in-place, iterations {start}..{steps}, checksum {whole.sum():.15e}", flush=True)
