"""heat.py — the 2D heat loop made resilient from Python: numpy arrays that are persistent memory.

    python3 examples/heat.py [steps]     # run twice: the second run resumes what the first committed

The field is a cairn dual region: u.read is the last committed version, the
loop writes all of u.write, and commit() makes it durable and swaps the two.
Kill the program at any moment (SIGKILL, power loss on NVM): the next run
restores the last committed iteration bit for bit and ends with the same
checksum as an uninterrupted run. $CAIRN_STRATEGY picks the strategy
(cairn.strategies()), $CAIRN_POOL_DIR the directory.
"""
import sys

import numpy as np

import cairn

N = 128
steps = int(sys.argv[1]) if len(sys.argv) > 1 else 200

with cairn.Context("heat_py") as ctx:
    u = ctx.dual_region("u", (N, N))  # two versions of the field
    it = ctx.region("it", 1, np.int64)  # iterations done
    ctx.open()
    if ctx.committed_version is None:
        u.read[:] = 0.0
        u.read[0, :] = 1.0  # a hot edge
        it.array[0] = 0
    else:
        ctx.restore()
    start = int(it.array[0])
    while it.array[0] < steps:
        a, b = u.read, u.write
        b[:] = a
        b[1:-1, 1:-1] = a[1:-1, 1:-1] + 0.2 * (a[:-2, 1:-1] + a[2:, 1:-1] + a[1:-1, :-2] + a[1:-1, 2:] - 4 * a[1:-1, 1:-1])
        it.array[0] += 1
        ctx.commit()  # durable from here
    print(f"heat.py: {ctx.strategy}, iterations {start}..{steps}, checksum {u.read.sum():.15e}")
