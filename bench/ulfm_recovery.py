#!/usr/bin/env python3
"""In-job recovery (ULFM, spare ranks) against `cairn launch`'s relaunch, issue 40.

The same jacobi-mpi job (--ranks computing ranks, 4) is run repeatedly; when rank 0
reports committing version --kill-at (its --progress line), this script
SIGKILLs the process of rank --victim and, for a lost node, deletes its node's
directory. Recovery time: from the kill to the first commit the job reports
after it recovered (in-job: after its "recovered" line; relaunch: after the
relaunched job's "restored" line), both stamped with the machine's real-time
clock. Every run must end with the uninterrupted run's checksum. Medians of
--repeats runs per case, the cases taking turns.

Cases:
  ulfm-process    ULFM build, 1 spare, in-place, the rank's process killed (its storage intact)
  ulfm-node       ULFM build, 1 spare, partner copies, one rank per simulated node: rank and node directory lost
  launch-inplace  default build, cairn launch relaunch, in-place, the process killed
  launch-file     default build, cairn launch relaunch, file strategy (file checkpoints), the process killed
  launch-node     default build, cairn launch relaunch, partner copies, rank and node directory lost

  bench/ulfm_recovery.py --ulfm-build build/ulfm --default-build build/release --repeats 5
"""
import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time

ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1")


def number_after(line, key):
    at = line.find(key)
    if at < 0:
        return None
    digits = ""
    for ch in line[at + len(key):]:
        if not ch.isdigit():
            break
        digits += ch
    return int(digits) if digits else None


def checksum(out):
    at = out.find("checksum ")
    return out[at + 9:at + 25] if at >= 0 else ""


def run(cmd, kill_at=None, victim=None, remove=None, marker=None, timeout=300):
    """Runs cmd; kills `victim` once version >= kill_at is reported. Returns
    (exit code, output, seconds from the kill to the first commit after `marker`)."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=ENV,
                         start_new_session=True)
    pids, out, kill_ns, marked, recovered_ns = {}, [], None, False, None
    deadline = time.time() + timeout
    for line in p.stdout:
        out.append(line)
        if time.time() > deadline:
            os.killpg(p.pid, signal.SIGKILL)
            break
        if line.startswith("pid rank="):
            pids[number_after(line, "rank=")] = number_after(line, "pid=")
        v = number_after(line, "committed version=") if line.startswith("committed version=") else None
        if kill_at is not None and kill_ns is None and v is not None and v >= kill_at and victim in pids:
            os.kill(pids.pop(victim), signal.SIGKILL)
            kill_ns = time.time_ns()
            if remove:
                shutil.rmtree(remove, ignore_errors=True)
        if kill_ns is not None and marker and line.startswith(marker):
            marked = True
        if marked and recovered_ns is None and v is not None:
            recovered_ns = number_after(line, " t=")
    rc = p.wait()
    text = "".join(out)
    if kill_at is not None and kill_ns is None:
        text += "\n[bench: no kill sent: version %d was not reported while rank %d's pid was known]\n" % (kill_at, victim)
    elif kill_ns is not None and recovered_ns is None:
        text += "\n[bench: killed, but no commit after a '%s' line]\n" % marker
    seconds = (recovered_ns - kill_ns) / 1e9 if kill_ns and recovered_ns else None
    return rc, text, seconds


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ulfm-build", default="build/ulfm")
    ap.add_argument("--default-build", default="build/release")
    ap.add_argument("--mpirun-ulfm", default="build/ulfm-venv/bin/mpirun")
    ap.add_argument("--dir", default="/dev/shm/cairn-ulfm-bench")
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--iterations", type=int, default=3000)
    ap.add_argument("--kill-at", type=int, default=300)
    ap.add_argument("--ranks", type=int, default=4, help="computing ranks (the ULFM cases add one spare)")
    ap.add_argument("--victim", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--cases", default="ulfm-process,ulfm-node,launch-inplace,launch-file,launch-node")
    a = ap.parse_args()
    ranks = a.ranks
    ulfm_app = os.path.join(a.ulfm_build, "apps/jacobi-mpi/jacobi-mpi")
    app = os.path.join(a.default_build, "apps/jacobi-mpi/jacobi-mpi")
    tool = os.path.join(a.default_build, "tools/cairn/cairn")
    problem = ["--size", str(a.size), "--iterations", str(a.iterations), "--progress", "--quiet"]
    node = ["--redundancy", "partner", "--ranks-per-node", "1"]

    def case(name, d):
        victim_dir = os.path.join(d, "node%d" % a.victim)
        if name.startswith("ulfm"):
            extra = ["--strategy", "in-place"] + (node if name == "ulfm-node" else [])
            cmd = [a.mpirun_ulfm, "--with-ft", "ulfm", "--oversubscribe", "-n", str(ranks + 1), ulfm_app, "--dir", d,
                   "--spares", "1"] + problem + extra
            return cmd, "recovered version=", victim_dir if name == "ulfm-node" else None
        strategy = "file" if name == "launch-file" else "in-place"
        extra = ["--strategy", strategy] + (node if name == "launch-node" else [])
        cmd = [tool, "launch", "-n", str(ranks), "--max-restarts", "2", "--", app, "--dir", d] + problem + extra
        return cmd, "restored version=", victim_dir if name == "launch-node" else None

    # The uninterrupted run's checksum (the ULFM build and the default one agree).
    shutil.rmtree(a.dir, ignore_errors=True)
    os.makedirs(a.dir)
    rc, out, _ = run(["mpirun", "--oversubscribe", "-n", str(ranks), app, "--dir", a.dir] + problem)
    expected = checksum(out)
    if rc != 0 or len(expected) != 16:
        sys.exit("the uninterrupted run failed:\n" + out)
    cases = a.cases.split(",")
    times = {c: [] for c in cases}
    inner = {c: [] for c in cases}
    for r in range(a.repeats):
        for c in cases:
            shutil.rmtree(a.dir, ignore_errors=True)
            os.makedirs(a.dir)
            cmd, marker, remove = case(c, a.dir)
            rc, out, s = run(cmd, a.kill_at, a.victim, remove, marker)
            ok = rc == 0 and checksum(out) == expected and s is not None
            print("%-15s run %d: %s %s" % (c, r + 1, "%.4f s" % s if s is not None else "-",
                                           "" if ok else "FAILED (rc %d, checksum %s)" % (rc, checksum(out))),
                  flush=True)
            if not ok:
                lines = [l for l in out.splitlines() if not l.startswith("committed version=")]
                sys.exit("kill sent: %s\n" % ("yes" if s is not None or "recovered" in out else "?") +
                         "\n".join(lines[-40:]))
            times[c].append(s)
            ms = number_after(out, "recover_ms=")
            if ms is not None:
                at = out.find("recover_ms=")
                inner[c].append(float(out[at + 11:out.find(" ", at)]))
    print("\n%d ranks computing, %dx%d grid, %d iterations, rank %d killed after version %d; medians of %d"
          % (ranks, a.size, a.size, a.iterations, a.victim, a.kill_at, a.repeats))
    print("| case | kill -> first commit after, s (median) | runs | recover() ms | vs ulfm-process | vs ulfm-node |")
    print("|---|---:|---|---:|---:|---:|")
    med = {c: statistics.median(v) for c, v in times.items()}
    for c in cases:
        runs = " ".join("%.4f" % v for v in times[c])
        rec = "%.2f" % statistics.median(inner[c]) if inner[c] else "-"
        vs = ["%.1fx" % (med[c] / med[b]) if b in med else "-" for b in ("ulfm-process", "ulfm-node")]
        print("| %s | %.4f | %s | %s | %s | %s |" % (c, med[c], runs, rec, vs[0], vs[1]))
    shutil.rmtree(a.dir, ignore_errors=True)


if __name__ == "__main__":
    main()
