#!/usr/bin/env python3
"""run_case.py — runs a Gerris case with CairnPersist uninterrupted, SIGKILLed at a random step and resumed.

For each mode (stream, octree, octree-sync): the case runs to its end (the reference); then it runs again with
CAIRN_GERRIS_KILL_AT=K (the module raises SIGKILL at step K, before that step's persist), then again
with CAIRN_GERRIS_RESUME=1. The resumed run must say it resumed at step K-1 and end with Gerris's final
binary output (end.gfs) byte for byte equal to the reference, and its printed norms must be the
reference's (the killed run's lines for steps 0..K-1, then the resumed run's from step K-1 on). The
reference's last norms line must be the one documented in cases/README.md (cases/expected_norms.txt).
octree (whose persists are written beside the next step; octree-sync is async = 0) is also killed inside
the writing of a step's persist (CAIRN_GERRIS_KILL_IN_PERSIST=K: after its header, before the PM-octree's commit) and must
resume at K-1 with the same end.gfs.

--bad-input instead checks the refusals: another case, another dimension, a changed variable list,
nothing persisted, and (with --cairn, the `cairn` tool that stages the streams out and back in) a
damaged header whose counts are hostile: a message and a failed resume, never a crash.

--ranks N (with --cairn): the case on N processes, a rank killed under `cairn launch` and the job relaunched
(check_parallel).

K is random; CAIRN_GERRIS_TEST_SEED=N repeats a run (the seed is printed).
"""
import argparse
import os
import random
import re
import shutil
import signal
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
# Debian's gerris is built with MPI and calls MPI_Init even when run serially: allow root, and keep Open MPI
# to its shared-memory transport (its PSM component probes for InfiniPath hardware and can sleep for
# minutes in a container).
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1", "OMPI_MCA_pml": "ob1",
           "OMPI_MCA_btl": "self,vader", "OMPI_MCA_mtl": "^psm,psm2"}


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def prepare(case_text, module, pools, mode, name=None):
    """mode: stream, octree (asynchronous persists, the default), or octree-sync (async = 0)."""
    text = re.sub(r"(?m)^GModule cairn$", "GModule " + module, case_text)
    text = re.sub(r"dir = \S+", "dir = " + pools, text)
    text = re.sub(r"mode = \S+", "mode = " + ("octree async = 0" if mode == "octree-sync" else mode), text)
    if name:
        text = re.sub(r"name = \S+", "name = " + name, text)
    return text


def run(gerris, workdir, gfs_text, env_extra, expect_kill=False):
    os.makedirs(workdir, exist_ok=True)
    with open(os.path.join(workdir, "case.gfs"), "w") as f:
        f.write(gfs_text)
    env = dict(os.environ, CAIRN_GERRIS_STATS="1", **MPI_ENV)
    for k in ("CAIRN_GERRIS_KILL_AT", "CAIRN_GERRIS_RESUME"):
        env.pop(k, None)
    env.update(env_extra)
    p = subprocess.run([gerris, "case.gfs"], cwd=workdir, env=env, capture_output=True, text=True, timeout=240)
    if expect_kill:
        if p.returncode != -signal.SIGKILL:
            fail("%s: expected SIGKILL, got exit %d\n%s" % (workdir, p.returncode, p.stderr))
    elif p.returncode != 0:
        fail("%s: gerris exited with %d\n%s" % (workdir, p.returncode, p.stderr))
    return p


def read(path, mode="r"):
    with open(path, mode) as f:
        return f.read()


def expected_norms(case):
    for line in read(os.path.join(HERE, "cases", "expected_norms.txt")).splitlines():
        if line.startswith(case + ": "):
            return line[len(case) + 2:]
    fail("no expected norms for %s in cases/expected_norms.txt" % case)


def kill_and_resume(args, case, mode, gfs, full, norms, workdir, hook, k):
    """Runs with hook=k (a SIGKILL at step k), resumes, and checks the resume at step k-1, end.gfs byte for
    byte and the norms: the killed run's lines (steps 0..k-1 for CAIRN_GERRIS_KILL_AT; a kill inside a
    persist may come a step or two later), then the uninterrupted run's from step k-1 on."""
    what = "%s %s: %s=%d" % (case, mode, hook, k)
    run(args.gerris, workdir, gfs, {hook: str(k)}, expect_kill=True)
    p = run(args.gerris, workdir, gfs, {"CAIRN_GERRIS_RESUME": "1"})
    m = re.search(r"resumed at step (\d+)", p.stderr)
    if not m or int(m.group(1)) != k - 1:
        fail("%s: expected a resume at step %d:\n%s" % (what, k - 1, p.stderr))
    if read(os.path.join(workdir, "end.gfs"), "rb") != read(os.path.join(full, "end.gfs"), "rb"):
        fail("%s, resumed: end.gfs differs from the uninterrupted run" % what)
    resumed = read(os.path.join(workdir, "norms")).splitlines()
    before = resumed[:len(resumed) - (len(norms) - (k - 1))]
    if (resumed[len(before):] != norms[k - 1:] or before != norms[:len(before)] or len(before) < k or
            (hook == "CAIRN_GERRIS_KILL_AT" and len(before) != k)):
        fail("%s, resumed: the norms differ from the uninterrupted run" % what)
    return p


def check_case(args):
    case = os.path.splitext(os.path.basename(args.case))[0]
    text = read(args.case)
    iend = int(re.search(r"iend = (\d+)", text).group(1))
    seed = int(os.environ.get("CAIRN_GERRIS_TEST_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    root = "/dev/shm/cairn-gerris-test-%s-%d" % (case, os.getpid())
    shutil.rmtree(root, ignore_errors=True)
    print("%s: seed %d, work in %s" % (case, seed, root))
    reference_norms = None
    for mode in args.modes.split(","):
        pools = os.path.join(root, "pools-" + mode)
        gfs = prepare(text, args.module, pools, mode)
        full = os.path.join(root, mode, "full")
        run(args.gerris, full, gfs, {})
        norms = read(os.path.join(full, "norms")).splitlines()
        if len(norms) != iend + 1:
            fail("%s %s: %d norms lines, expected %d" % (case, mode, len(norms), iend + 1))
        if norms[-1] != expected_norms(case):
            fail("%s %s: last norms\n  %s\nexpected (cases/expected_norms.txt)\n  %s" %
                 (case, mode, norms[-1], expected_norms(case)))
        if reference_norms is None:
            reference_norms = norms
        elif norms != reference_norms:
            fail("%s: stream and octree modes print different norms" % case)

        k = rng.randrange(2, iend)
        p = kill_and_resume(args, case, mode, gfs, full, norms, os.path.join(root, mode, "killed"),
                            "CAIRN_GERRIS_KILL_AT", k)
        stats = [l for l in p.stderr.splitlines() if l.startswith("CairnPersist: ") and "persists" in l]
        print("%s %s: killed at step %d, resumed at %d, end.gfs identical (%d bytes); %s" %
              (case, mode, k, k - 1, os.path.getsize(os.path.join(full, "end.gfs")), stats[-1] if stats else ""))
        if mode == "octree":
            # Killed inside the persist of step k, while it is written beside step k + 1: its header is
            # committed, the PM-octree is not; the resume is at k - 1.
            k = rng.randrange(2, iend)
            kill_and_resume(args, case, mode, gfs, full, norms, os.path.join(root, mode, "inside"),
                            "CAIRN_GERRIS_KILL_IN_PERSIST", k)
            print("%s %s: killed inside the persist of step %d, resumed at %d, end.gfs identical" %
                  (case, mode, k, k - 1))
    shutil.rmtree(root, ignore_errors=True)
    print("PASS")


def mpirun_env(extra):
    env = dict(os.environ, CAIRN_GERRIS_STATS="1", OMPI_MCA_rmaps_base_oversubscribe="1", **MPI_ENV)
    for k in ("CAIRN_GERRIS_KILL_AT", "CAIRN_GERRIS_KILL_RANK", "CAIRN_GERRIS_RESUME"):
        env.pop(k, None)
    env.update(extra)
    return env


def run_parallel(args, workdir, gfs, ranks, extra, launcher=None):
    """gerris on `ranks` processes: under mpirun, or under `cairn launch` (launcher = its argument list), whose
    relaunch appends --resume, which the shell turns into CAIRN_GERRIS_RESUME=1 (gerris takes no such switch)."""
    os.makedirs(workdir, exist_ok=True)
    with open(os.path.join(workdir, "case.gfs"), "w") as f:
        f.write(gfs)
    body = 'if [ "$1" = --resume ]; then export CAIRN_GERRIS_RESUME=1; fi; exec "$0" case.gfs'
    if launcher:
        cmd = launcher + ["-n", str(ranks), "--", "sh", "-c", body, args.gerris]
    else:
        cmd = ["mpirun", "--allow-run-as-root", "-n", str(ranks), args.gerris, "case.gfs"]
    return subprocess.run(cmd, cwd=workdir, env=mpirun_env(extra), capture_output=True, text=True, timeout=240)


def check_parallel(args):
    """The case on --ranks processes (octree mode, asynchronous persists): uninterrupted under mpirun; then
    under `cairn launch`, one random rank SIGKILLs itself at a random step K (CAIRN_GERRIS_KILL_AT/_RANK: once
    the step before is agreed on by every process, it announces the kill and raises SIGKILL), the job dies
    and is relaunched with the resume switch: every rank must resume at K-1, and Gerris's end.gfs and norms
    must be the uninterrupted run's byte for byte. Then a resume on another process count is refused naming
    the count that wrote the pools."""
    case = os.path.splitext(os.path.basename(args.case))[0]
    text = read(args.case)
    iend = int(re.search(r"iend = (\d+)", text).group(1))
    seed = int(os.environ.get("CAIRN_GERRIS_TEST_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    n = args.ranks
    root = "/dev/shm/cairn-gerris-par-%s-%d" % (case, os.getpid())
    shutil.rmtree(root, ignore_errors=True)
    print("%s on %d processes: seed %d, work in %s" % (case, n, seed, root))
    gfs = prepare(text, args.module, os.path.join(root, "pools"), "octree")
    full = os.path.join(root, "full")
    p = run_parallel(args, full, gfs, n, {})
    if p.returncode != 0:
        fail("%s: the uninterrupted run exited with %d\n%s" % (full, p.returncode, p.stderr))
    norms = read(os.path.join(full, "norms")).splitlines()
    # Gerris's parallel run may end elsewhere than its serial one (solid4boxes2D does): CASE@N if listed
    listed = "%s@%d" % (case, n) if ("%s@%d: " % (case, n)) in read(os.path.join(HERE, "cases", "expected_norms.txt")) else case
    if len(norms) != iend + 1 or norms[-1] != expected_norms(listed):
        fail("%s on %d processes: %d norms lines, the last\n  %s\nexpected %d lines ending\n  %s" %
             (case, n, len(norms), norms[-1] if norms else "", iend + 1, expected_norms(listed)))

    k, victim = rng.randrange(2, iend), rng.randrange(n)
    killed = os.path.join(root, "killed")
    p = run_parallel(args, killed, gfs, n, {"CAIRN_GERRIS_KILL_AT": str(k), "CAIRN_GERRIS_KILL_RANK": str(victim)},
                     launcher=[args.cairn, "launch", "--max-restarts", "1"])
    if p.returncode != 0:
        fail("%s: cairn launch exited with %d\n%s\n%s" % (killed, p.returncode, p.stdout, p.stderr))
    if "rank %d killing itself at step %d" % (victim, k) not in p.stderr or "relaunching" not in p.stdout:
        fail("%s: expected rank %d to die at step %d and the job to be relaunched:\n%s\n%s" %
             (killed, victim, k, p.stdout, p.stderr))
    resumed = sorted(int(r) for r, s in re.findall(r"rank (\d+) resumed at step (\d+)", p.stderr) if int(s) == k - 1)
    if resumed != list(range(n)):
        fail("%s: expected every rank to resume at step %d:\n%s" % (killed, k - 1, p.stderr))
    if read(os.path.join(killed, "end.gfs"), "rb") != read(os.path.join(full, "end.gfs"), "rb"):
        fail("%s: rank %d killed at step %d, resumed: end.gfs differs from the uninterrupted run" % (case, victim, k))
    got = read(os.path.join(killed, "norms")).splitlines()
    if got[:k] != norms[:k] or got[k:] != norms[k - 1:]:
        fail("%s: rank %d killed at step %d, resumed: the norms differ from the uninterrupted run" % (case, victim, k))
    print("%s on %d processes: rank %d killed at step %d under cairn launch, every rank resumed at %d, end.gfs "
          "identical (%d bytes), norms identical" % (case, n, victim, k, k - 1, os.path.getsize(os.path.join(full, "end.gfs"))))

    # A rank killed inside the writing of step K's persist (its header committed, its PM-octree not): the
    # step before was agreed on by then, so every rank resumes at K-1.
    k, victim = rng.randrange(2, iend), rng.randrange(n)
    inside = os.path.join(root, "inside")
    p = run_parallel(args, inside, gfs, n, {"CAIRN_GERRIS_KILL_IN_PERSIST": str(k), "CAIRN_GERRIS_KILL_RANK": str(victim)},
                     launcher=[args.cairn, "launch", "--max-restarts", "1"])
    resumed = sorted(int(r) for r, s in re.findall(r"rank (\d+) resumed at step (\d+)", p.stderr) if int(s) == k - 1)
    if (p.returncode != 0 or "rank %d killing itself inside the persist of step %d" % (victim, k) not in p.stderr or
            resumed != list(range(n))):
        fail("%s: expected rank %d to die inside the persist of step %d and every rank to resume at %d:\n%s\n%s" %
             (inside, victim, k, k - 1, p.stdout, p.stderr))
    if read(os.path.join(inside, "end.gfs"), "rb") != read(os.path.join(full, "end.gfs"), "rb"):
        fail("%s: rank %d killed inside the persist of step %d, resumed: end.gfs differs" % (case, victim, k))
    print("%s on %d processes: rank %d killed inside the persist of step %d, every rank resumed at %d, end.gfs "
          "identical" % (case, n, victim, k, k - 1))

    # a rank's pools lost (no partner copies): the resume fails naming that process
    lost = rng.randrange(n)
    shutil.rmtree(os.path.join(root, "pools", "%s.rank%d" % (case, lost)))
    p = run_parallel(args, os.path.join(root, "lost"), gfs, n, {"CAIRN_GERRIS_RESUME": "1"})
    words = "the pools of process %d are missing" % lost
    if p.returncode == 0 or words not in p.stderr:
        fail("resume without rank %d's pools: expected a refusal mentioning '%s', got exit %d:\n%s" %
             (lost, words, p.returncode, p.stderr))
    print("refused (rank %d's pools lost): %s" % (lost, [l for l in p.stderr.splitlines() if words in l][0]))

    # the same domain on half the processes, or twice as many from 2 (Gerris itself needs the boxes' pids to
    # exist; the case must have a box for each); then serially
    other = n // 2 if n > 2 else 2 * n
    regrouped = re.sub(r"id = (\d+) pid = \d+", lambda m: "id = %s pid = %d" % (m.group(1), (int(m.group(1)) - 1) % other),
                       gfs)
    p = run_parallel(args, os.path.join(root, "other"), regrouped, other, {"CAIRN_GERRIS_RESUME": "1"})
    words = "written by a run on %d processes, this one runs on %d" % (n, other)
    if p.returncode == 0 or words not in p.stderr:
        fail("resume on %d processes: expected a refusal mentioning '%s', got exit %d:\n%s" %
             (other, words, p.returncode, p.stderr))
    print("refused (%d processes): %s" % (other, [l for l in p.stderr.splitlines() if words in l][0]))
    expect_refusal(args.gerris, os.path.join(root, "serial"), gfs,
                   "written by a run on %d processes, this one is serial" % n)
    shutil.rmtree(root, ignore_errors=True)
    print("PASS")


def expect_refusal(gerris, workdir, gfs, words, env_extra=None):
    os.makedirs(workdir, exist_ok=True)
    with open(os.path.join(workdir, "case.gfs"), "w") as f:
        f.write(gfs)
    env = dict(os.environ, **MPI_ENV)
    env.update(env_extra if env_extra is not None else {"CAIRN_GERRIS_RESUME": "1"})
    p = subprocess.run([gerris, "case.gfs"], cwd=workdir, env=env, capture_output=True, text=True, timeout=240)
    if p.returncode < 0:
        fail("%s: killed by signal %d instead of a refusal mentioning '%s':\n%s" %
             (workdir, -p.returncode, words, p.stderr))
    if p.returncode == 0 or words not in p.stderr:
        fail("%s: expected a refusal mentioning '%s', got exit %d:\n%s" % (workdir, words, p.returncode, p.stderr))
    print("refused (%s): %s" % (words, [l for l in p.stderr.splitlines() if "CairnPersist" in l][-1]))


EVENT_STATE_BYTES = 72  # EventState in cairn_gerris.c: 4 doubles, 10 32-bit integers


def header_layout(data):
    """Offsets in a header stream: (nevents, the cell count after the event states). The Header struct
    ends with nvars and nevents (32-bit) and is followed by the length of the variable names and the
    names ("P,Pmac,U,..."): found as the first 8-aligned length followed by that many printable bytes;
    then the box graph's length and text."""
    for off in range(16, min(len(data) - 4, 4096), 8):
        n = int.from_bytes(data[off:off + 4], "little")
        names = data[off + 4:off + 4 + n]
        if 0 < n < 4096 and len(names) == n and b"," in names and all(32 <= c < 127 for c in names):
            nevents = int.from_bytes(data[off - 4:off], "little")
            graph = int.from_bytes(data[off + 4 + n:off + 8 + n], "little")  # the box graph's text follows
            return off - 4, off + 8 + n + graph + nevents * EVENT_STATE_BYTES
    fail("no CairnPersist header found in the stream (%d bytes)" % len(data))


def damage_header(cairn, workdir, pool, stream, field, value):
    """Replaces the stream `stream` of `pool` by a copy whose `field` (nevents or cells) is `value`."""
    os.makedirs(workdir, exist_ok=True)
    uri = "pmem:%s#%s" % (pool, stream)
    p = subprocess.run([cairn, "stream", "cat", uri], capture_output=True, timeout=120)
    if p.returncode != 0:
        fail("cairn stream cat %s: %s" % (uri, p.stderr.decode(errors="replace")))
    data = bytearray(p.stdout)
    nevents_at, cells_at = header_layout(data)
    if field == "nevents":
        data[nevents_at:nevents_at + 4] = value.to_bytes(4, "little")
    else:
        data[cells_at:cells_at + 8] = value.to_bytes(8, "little")
    path = os.path.join(workdir, stream)
    with open(path, "wb") as f:
        f.write(data)
    p = subprocess.run([cairn, "stage", "in", "-q", path, uri], capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        fail("cairn stage in %s %s: %s" % (path, uri, p.stderr))


def check_damaged_headers(args, text, root):
    """Hostile counts in a committed header: the resume stops with a message naming the damage."""
    for mode in ("stream", "octree"):
        pools = os.path.join(root, "damaged-" + mode)
        gfs = prepare(text, args.module, pools, mode, "x")
        pool = os.path.join(pools, "x.pool")
        # stream mode: the "sim" stream; octree mode: both header slots (the newest one is read)
        streams = ["sim"] if mode == "stream" else ["hdr0", "hdr1"]
        # The event count whose + 1 wrapped to 0, one that is merely too large, and a cell count
        # (stream mode) or interior and ghost cell count (octree mode) the stream does not hold.
        for field, value, words in (("nevents", 0xFFFFFFFF, "damaged header"), ("nevents", 1000, "damaged header"),
                                    ("cells", 1 << 31, "truncated or damaged")):
            shutil.rmtree(pools, ignore_errors=True)
            run(args.gerris, os.path.join(root, mode, "damaged-written"), gfs, {})
            for s in streams:
                damage_header(args.cairn, os.path.join(root, mode, "damaged-" + field), pool, s, field, value)
            expect_refusal(args.gerris, os.path.join(root, mode, "damaged-%s-%d" % (field, value)), gfs, words)


def check_bad_input(args):
    text = read(args.case)
    root = "/dev/shm/cairn-gerris-bad-%d" % os.getpid()
    shutil.rmtree(root, ignore_errors=True)
    other = text.replace("cmax = 1e-3", "cmax = 2e-3")  # the same variables, another case
    text3d = read(os.path.join(HERE, "cases", "shear3D.gfs"))
    more_vars = text.replace("  VariableTracer T\n", "  VariableTracer T\n  VariableTracer Dye\n")
    boxes = read(os.path.join(HERE, "cases", "shear4boxes2D.gfs"))
    for mode in ("stream", "octree"):
        pools = os.path.join(root, "pools-" + mode)
        expect_refusal(args.gerris, os.path.join(root, mode, "none"), prepare(text, args.module, pools, mode, "x"),
                       "cannot resume")
        run(args.gerris, os.path.join(root, mode, "written"), prepare(text, args.module, pools, mode, "x"), {})
        expect_refusal(args.gerris, os.path.join(root, mode, "case"), prepare(other, args.module, pools, mode, "x"),
                       "another case")
        expect_refusal(args.gerris, os.path.join(root, mode, "vars"),
                       prepare(more_vars, args.module, pools, mode, "x"), "variable list changed")
        expect_refusal(args.gerris3d, os.path.join(root, mode, "dims"),
                       prepare(text3d, args.module3d, pools, mode, "x"), "2D simulation")
        # a pool of the same flow on another domain (four boxes): refused naming both box graphs
        expect_refusal(args.gerris, os.path.join(root, mode, "boxes"), prepare(boxes, args.module, pools, mode, "x"),
                       "another domain or decomposition: 1 box")
        # and the pool still resumes its own case afterwards
        run(args.gerris, os.path.join(root, mode, "written"), prepare(text, args.module, pools, mode, "x"),
            {"CAIRN_GERRIS_RESUME": "1"})
    # a PM-octree pool too small for the mesh: stopped with a message naming the variable to raise
    expect_refusal(args.gerris, os.path.join(root, "octree", "small"),
                   prepare(text, args.module, os.path.join(root, "pools-small"), "octree", "x"),
                   "CAIRN_GERRIS_POOL_SIZE", {"CAIRN_GERRIS_POOL_SIZE": str(1 << 20)})
    if args.cairn:
        check_damaged_headers(args, text, root)
    shutil.rmtree(root, ignore_errors=True)
    print("PASS")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gerris", required=True)
    ap.add_argument("--module", required=True)
    ap.add_argument("--case", required=True)
    ap.add_argument("--bad-input", action="store_true")
    ap.add_argument("--modes", default="stream,octree,octree-sync",
                    help="comma-separated: stream, octree, octree-sync")
    ap.add_argument("--gerris3d")
    ap.add_argument("--module3d")
    ap.add_argument("--cairn", help="the cairn tool (--bad-input: damaged headers; --ranks: cairn launch)")
    ap.add_argument("--ranks", type=int, default=0, help="run on this many processes (check_parallel)")
    args = ap.parse_args()
    if args.ranks:
        check_parallel(args)
    elif args.bad_input:
        check_bad_input(args)
    else:
        check_case(args)


if __name__ == "__main__":
    main()
