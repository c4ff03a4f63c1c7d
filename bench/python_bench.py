"""python_bench.py — what the Python binding costs (issue 32's goals); not a test, prints a table.

    python3 bench/python_bench.py [--repeat 7]     (with cairn importable: pip install ./python,
                                                    or PYTHONPATH=<release build>/python)

1. Per-call overhead of a commit from Python: the wall time of ctx.commit()
   minus the library's own time for the same commit (Stats::last_commit_seconds,
   measured inside persist::Context::commit, which is what a C caller pays
   besides one call), in-place, one 4 KiB dual region, median of each run's
   mean over 2000 commits.
2. A numpy heat loop (1024^2 doubles, 8 MiB a version) persisted in place
   every iteration vs the same loop on plain numpy arrays: median times and
   the ratio.
"""
import argparse
import os
import statistics
import tempfile
import time

import numpy as np

import cairn


def commit_overhead(pool_dir, commits=2000):
    with cairn.Context("bench_commit", strategy="in-place", dir=pool_dir, threads=1) as ctx:
        u = ctx.dual_region("u", 512)
        ctx.open()
        for _ in range(100):  # warm up
            u.write[0] += 1.0
            ctx.commit()
        inner = 0.0
        t0 = time.perf_counter()
        for _ in range(commits):
            ctx.commit()
            inner += ctx.stats["last_commit_seconds"]
        wall = time.perf_counter() - t0
        del u
    # ctx.stats itself costs a dict per call: timed apart and taken out.
    return wall / commits, inner / commits


def stats_cost(pool_dir, calls=2000):
    with cairn.Context("bench_stats", strategy="in-place", dir=pool_dir, threads=1) as ctx:
        ctx.region("r", 8)
        ctx.open()
        t0 = time.perf_counter()
        for _ in range(calls):
            ctx.stats["last_commit_seconds"]
        return (time.perf_counter() - t0) / calls


def step(a, b):
    b[0, :] = a[0, :]
    b[-1, :] = a[-1, :]
    b[:, 0] = a[:, 0]
    b[:, -1] = a[:, -1]
    b[1:-1, 1:-1] = a[1:-1, 1:-1] + 0.2 * (a[:-2, 1:-1] + a[2:, 1:-1] + a[1:-1, :-2] + a[1:-1, 2:] - 4 * a[1:-1, 1:-1])


def heat_plain(n, steps):
    a = np.zeros((n, n))
    a[0, :] = 1.0
    b = np.empty_like(a)
    t0 = time.perf_counter()
    for _ in range(steps):
        step(a, b)
        a, b = b, a
    return time.perf_counter() - t0, a.sum()


def heat_persisted(pool_dir, n, steps):
    with cairn.Context("bench_heat", strategy="in-place", dir=pool_dir) as ctx:
        u = ctx.dual_region("u", (n, n))
        ctx.open()
        u.read[:] = 0.0
        u.read[0, :] = 1.0
        t0 = time.perf_counter()
        for _ in range(steps):
            step(u.read, u.write)
            ctx.commit()
        t = time.perf_counter() - t0
        s = u.read.sum()
        del u
    return t, s


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--size", type=int, default=1024)
    p.add_argument("--steps", type=int, default=100)
    args = p.parse_args()
    base = os.environ.get("CAIRN_POOL_DIR", "/dev/shm")
    with tempfile.TemporaryDirectory(prefix="cairn-pybench-", dir=base if os.path.isdir(base) else None) as d:
        over, inner, plain, pers = [], [], [], []
        sc = statistics.median(stats_cost(d) for _ in range(3))
        for r in range(args.repeat):
            w, i = commit_overhead(d)
            over.append(w - i - sc)
            inner.append(i)
            tp, s0 = heat_plain(args.size, args.steps)
            tq, s1 = heat_persisted(d, args.size, args.steps)
            assert s0 == s1, (s0, s1)
            plain.append(tp)
            pers.append(tq)
            for f in os.listdir(d):
                os.remove(os.path.join(d, f))
        mo, mi = statistics.median(over), statistics.median(inner)
        mp, mq = statistics.median(plain), statistics.median(pers)
        print(f"commit, in-place, 4 KiB dual region: library {mi * 1e6:.2f} us, Python binding adds {mo * 1e6:.2f} us "
              f"per call (ratio Python/C {(mi + mo) / mi:.2f})")
        print(f"heat {args.size}^2 x {args.steps} steps: numpy {mp:.3f} s, persisted in place every iteration "
              f"{mq:.3f} s, ratio {mq / mp:.3f}")


if __name__ == "__main__":
    main()
