# test_dist.py — cairn.dist over mpi4py: a 2-rank heat loop under mpirun ends bit for bit where the
# serial loop ends; under `cairn launch`, rank 1 SIGKILLed in the middle of an iteration it announces,
# the relaunched job resumes at the global version and ends bit for bit the same.
import hashlib
import os
import signal
import subprocess
import sys

import numpy as np
import pytest

import cairn

pytestmark = pytest.mark.skipif(
    not cairn.dist_available() or not os.environ.get("CAIRN_MPIEXEC"),
    reason="cairn.dist not built (MPI or mpi4py missing) or no mpirun given ($CAIRN_MPIEXEC)",
)

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "dist_heat_worker.py")
N, STEPS, KILL_AT = 32, 30, 17
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1")


def reference():
    u = np.zeros((N, N))
    u[0, :] = 1.0
    for _ in range(STEPS):
        b = u.copy()
        b[1:-1, 1:-1] = u[1:-1, 1:-1] + 0.2 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4 * u[1:-1, 1:-1])
        u = b
    return u


def results(stdout):
    lines = {ln.split()[0]: ln.split() for ln in stdout.splitlines() if ln.startswith(("start ", "sha256 "))}
    assert lines["start"][2:] == ["done", str(STEPS)]  # the plain region counted every iteration once
    return int(lines["start"][1]), lines["sha256"][1]


def test_collective_commit_at_two_ranks(pool_dir):
    cmd = [os.environ["CAIRN_MPIEXEC"], "-n", "2", sys.executable, WORKER, str(N), str(STEPS), "0", pool_dir]
    first = subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=120)
    assert first.returncode == 0, first.stderr
    assert results(first.stdout) == (0, hashlib.sha256(reference().tobytes()).hexdigest())
    # A second job with --resume restores the global version (the last iteration) on both ranks.
    again = subprocess.run(cmd + ["--resume"], capture_output=True, text=True, env=ENV, timeout=120)
    assert again.returncode == 0, again.stderr
    assert results(again.stdout) == (STEPS, hashlib.sha256(reference().tobytes()).hexdigest())


def test_wrong_communicator():
    import cairn.dist

    with pytest.raises(cairn.InvalidArgumentError) as e:
        cairn.dist.Context("MPI.COMM_WORLD")
    assert "mpi4py" in str(e.value)


def test_rank_killed_under_cairn_launch_resumes_bit_for_bit(pool_dir):
    tool = os.environ["CAIRN_TOOL"]
    cmd = [tool, "launch", "-n", "2", "--mpirun", os.environ["CAIRN_MPIEXEC"], "--", sys.executable, WORKER,
           str(N), str(STEPS), str(KILL_AT), pool_dir]
    err = open(os.path.join(pool_dir, "launch.err"), "w+")  # a file: a full stderr pipe would stall the job
    job = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True, env=ENV)
    out = []
    for line in job.stdout:
        out.append(line)
        if line.startswith("progress rank=1"):
            fields = dict(w.split("=") for w in line.split()[1:])
            assert fields["step"] == str(KILL_AT)
            os.kill(int(fields["pid"]), signal.SIGKILL)
    job.wait(timeout=120)
    stdout = "".join(out)
    err.seek(0)
    assert job.returncode == 0, stdout + err.read()
    assert "relaunching with --resume" in stdout
    start, digest = results(stdout)
    # Rank 1 died before its commit of KILL_AT: the global version is the one before, on both ranks.
    assert start == KILL_AT - 1
    assert digest == hashlib.sha256(reference().tobytes()).hexdigest()
