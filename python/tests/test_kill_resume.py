# test_kill_resume.py — a Python heat loop persisted every iteration is SIGKILLed in the middle of an
# iteration it announces (half of the new version written), resumed, and ends bit for bit where an
# uninterrupted run ends.
import os
import signal
import subprocess
import sys

import numpy as np
import pytest

import cairn

N, STEPS, KILL_AT = 64, 40, 23

# The child: the loop, killed by the parent once it says "half <k>" (it then waits on stdin,
# which the parent never writes: no sleep decides where the kill lands).
CHILD = r"""
import sys, numpy as np, cairn
n, steps, kill_at, strategy, pool_dir = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
with cairn.Context("heat", strategy=strategy, dir=pool_dir, threads=1) as ctx:
    u = ctx.dual_region("u", (n, n))
    it = ctx.region("it", 1, np.int64)
    ctx.open()
    if ctx.committed_version is None:
        u.read[:] = 0.0
        u.read[0, :] = 1.0
        it.array[0] = 0
    else:
        ctx.restore()
    print("start", it.array[0], flush=True)
    while it.array[0] < steps:
        a, b = u.read, u.write
        b[:] = a
        b[1:-1, 1:-1] = a[1:-1, 1:-1] + 0.2 * (a[:-2, 1:-1] + a[2:, 1:-1] + a[1:-1, :-2] + a[1:-1, 2:] - 4 * a[1:-1, 1:-1])
        if it.array[0] + 1 == kill_at:
            b[: n // 2] = -1.0  # half of the next version overwritten with garbage
            print("half", kill_at, flush=True)
            sys.stdin.read()
        it.array[0] += 1
        ctx.commit()
    sys.stdout.write(u.read.tobytes().hex() + "\n")
"""


def reference():
    u = np.zeros((N, N))
    u[0, :] = 1.0
    for _ in range(STEPS):
        b = u.copy()
        b[1:-1, 1:-1] = u[1:-1, 1:-1] + 0.2 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4 * u[1:-1, 1:-1])
        u = b
    return u


@pytest.mark.parametrize("strategy", ["in-place", "dram-cache"])
def test_sigkill_and_resume_bit_for_bit(pool_dir, strategy):
    args = [sys.executable, "-c", CHILD, str(N), str(STEPS)]
    child = subprocess.Popen(args + [str(KILL_AT), strategy, pool_dir], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().split() == ["start", "0"]
    assert child.stdout.readline().split() == ["half", str(KILL_AT)]
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    assert child.returncode == -signal.SIGKILL

    out = subprocess.run(args + ["0", strategy, pool_dir], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                         check=True).stdout.split("\n")
    assert out[0].split() == ["start", str(KILL_AT - 1)]  # resumed after the last committed iteration
    resumed = np.frombuffer(bytes.fromhex(out[1]), np.float64).reshape(N, N)
    assert resumed.tobytes() == reference().tobytes()
