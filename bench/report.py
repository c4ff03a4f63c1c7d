#!/usr/bin/env python3
"""report.py — the page of current figures, generated from recorded JSON.

Every headline figure of cairn comes from a benchmark's JSON recorded under
bench/results/ (one file per recording: EXPERIMENT-YYYY-MM-DD-HHMMSS.json, the
JSON that `cairn bench EXPERIMENT ... --json FILE` wrote). This script pools
the recordings of each experiment and writes

  - the table at the top of bench/RESULTS.md, between the markers
    <!-- figures:begin --> and <!-- figures:end -->: one row per figure with
    its goal, the median of every recorded repetition and a 95 % confidence
    interval, the verdict judged on that interval, the dates, and the command
    that records it;
  - bench/plots/figures.png (every figure against its goal) and current-EXPERIMENT.png, one plot per
    experiment from its newest recording (bench/plot.py's figures).

A figure's value is the median of per-repetition values pooled over the
recordings. Where a benchmark's repetitions pair up (variants interleaved in
one repetition), a value is one repetition's ratio and the interval is the
distribution-free one of the median from order statistics. Where two sets of
repetitions do not pair up (modes measured one after the other), the value
is the ratio of the two medians and the interval a percentile bootstrap with
a fixed seed, so the table is reproducible. The verdict: "met" when the whole
interval meets the goal, "missed" when none of it does, else "undecided at
this noise".

Usage:
  python3 bench/report.py                 rewrite the table in bench/RESULTS.md and the plots
  python3 bench/report.py --check         exit 1 if the table in RESULTS.md is not the one
                                          bench/results/ gives (no plots; for the test suite)
  python3 bench/report.py --table         print the table only
  python3 bench/report.py --record EXP --cairn PATH [--results DIR]
                                          run EXP's command once and keep its JSON in bench/results/
Options: --results DIR (default bench/results), --page FILE (default bench/RESULTS.md),
         --plots DIR (default bench/plots), --no-plots.

Only the Python standard library is needed for the table; the plots need
matplotlib (Debian: python3-matplotlib).
"""
import datetime
import glob
import json
import math
import os
import random
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
BEGIN = "<!-- figures:begin -->"
END = "<!-- figures:end -->"
CONFIDENCE = 0.95
BOOTSTRAP_ROUNDS = 2000

# The command that records each experiment: what --record runs and what the
# table prints. Sizes are chosen to finish in minutes on a 2-core machine.
COMMANDS = {
    "overhead": "cairn bench overhead --profiles dram --variants native,in-place -r 3",
    "checkpoint": "cairn bench checkpoint --parts table4 --strategies file,in-place,shadow -r 3",
    "strategies": "cairn bench strategies --size 64M --profiles dram -r 5",
    "octree": "cairn bench octree --levels 7:4 -r 3",
    "streams": "cairn bench streams -p 1 --sizes 16M --modes file-disk-fsync,file-tmpfs,mem,pmem -r 3",
    "workflow": "cairn bench workflow -r 3",
    "crashsim": "cairn-crashsim bench --quick -r 3",
    "placement": "cairn bench placement --profiles dram --size jacobi=1024:40,jacobi-sharpen=1024:16 -r 3",
    "stream": "cairn bench stream --size 64M --profiles dram -r 5",
    "amr": "cairn bench amr --size 5 --sizes 4,5 -r 3",
    "dist": "cairn bench dist --experiments overhead,recovery --ranks 2 --job-ranks 2 --size 256:200 --recovery-size 128:2000 -r 3",
    "gerris": "cairn bench gerris -r 3",
}


# ------------------------------------------------------------------ statistics


def median(values):
    v = sorted(values)
    n = len(v)
    if n == 0:
        return float("nan")
    return v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])


def median_interval(values):
    """Distribution-free interval of the median from order statistics.

    The largest k with P(Binomial(n, 1/2) < k) <= (1 - CONFIDENCE) / 2 gives
    [x_(k), x_(n+1-k)] (1-based). Below 6 values no pair of order statistics
    reaches 95 %: the range is returned, and its true confidence is lower."""
    v = sorted(values)
    n = len(v)
    if n == 0:
        return float("nan"), float("nan")
    tail = (1 - CONFIDENCE) / 2
    k, cumulative = 0, 0.0
    for j in range(n):
        cumulative += math.comb(n, j) / 2**n  # P(B = j)
        if cumulative > tail:
            break
        k = j + 1
    k = max(k, 1)
    return v[k - 1], v[n - k]


def bootstrap_interval(statistic, samples, seed=37):
    """Percentile bootstrap of statistic(*resampled sets), each set resampled on its own."""
    rng = random.Random(seed)
    stats = []
    for _ in range(BOOTSTRAP_ROUNDS):
        drawn = [[s[rng.randrange(len(s))] for _ in s] for s in samples]
        stats.append(statistic(*drawn))
    stats.sort()
    tail = (1 - CONFIDENCE) / 2
    lo = stats[int(math.floor(tail * (BOOTSTRAP_ROUNDS - 1)))]
    hi = stats[int(math.ceil((1 - tail) * (BOOTSTRAP_ROUNDS - 1)))]
    return lo, hi


def paired(values):
    """A figure from per-repetition values: median and order-statistics interval."""
    values = [x for x in values if x is not None and math.isfinite(x)]
    if not values:
        return None
    lo, hi = median_interval(values)
    return {"value": median(values), "lo": lo, "hi": hi, "n": len(values), "method": "order statistics"}


def ratio_of_medians(numerator, denominator):
    """median(numerator) / median(denominator), bootstrap interval."""
    if not numerator or not denominator:
        return None

    def stat(a, b):
        return median(a) / median(b)

    lo, hi = bootstrap_interval(stat, [numerator, denominator])
    return {
        "value": stat(numerator, denominator),
        "lo": lo,
        "hi": hi,
        "n": min(len(numerator), len(denominator)),
        "method": "bootstrap",
    }


def verdict(fig, op, goal):
    if fig is None:
        return "not recorded"
    if op == ">=":
        if fig["lo"] >= goal:
            return "met"
        if fig["hi"] < goal:
            return "missed"
    else:
        if fig["hi"] <= goal:
            return "met"
        if fig["lo"] > goal:
            return "missed"
    return "undecided at this noise"


# ------------------------------------------------------------------ figures
# Each figure: (name, experiment, op, goal, unit, extract). extract(docs) gets
# every recording of the experiment (parsed JSON, oldest first) and returns
# a figure dict (paired or ratio_of_medians) or None.


def overhead_values(docs, app, profile="dram", threads=1, variant="in-place"):
    """In-place overhead in % of native, one value per repetition (the variants of a repetition run back to back)."""
    out = []
    for d in docs:
        rows = {
            (r["variant"]): r
            for r in d.get("rows", [])
            if r["app"] == app and r["profile"] == profile and r["threads"] == threads
        }
        if "native" not in rows or variant not in rows:
            continue
        nat, var = rows["native"]["samples_ms"], rows[variant]["samples_ms"]
        out += [100.0 * (v / n - 1.0) for n, v in zip(nat, var) if n > 0]
    return out


def overhead_figure(app):
    return lambda docs: paired(overhead_values(docs, app))


def overhead_across_apps(docs):
    per_app = [overhead_values(docs, a) for a in ("jacobi", "npb-cg", "npb-mg", "sph")]
    per_app = [v for v in per_app if v]
    if not per_app:
        return None

    def stat(*sets):
        return median([median(s) for s in sets])

    lo, hi = bootstrap_interval(stat, per_app)
    return {"value": stat(*per_app), "lo": lo, "hi": hi, "n": min(len(s) for s in per_app), "method": "bootstrap"}


def restore_vs_file(variant):
    def extract(docs):
        out = []
        for d in docs:
            rows = {r["variant"]: r for r in d.get("table4", {}).get("rows", [])}
            if "file" not in rows or variant not in rows:
                continue
            f, v = rows["file"].get("restore_samples_ms", []), rows[variant].get("restore_samples_ms", [])
            out += [a / b for a, b in zip(f, v) if b > 0]
        return paired(out)

    return extract


def strategy_rows(docs, strategy, profile="dram"):
    for d in docs:
        base = {b["profile"]: b for b in d.get("baselines", [])}
        for r in d.get("rows", []):
            if r["strategy"] == strategy and r["profile"] == profile and r["status"] == "ok":
                yield d, base.get(profile), r


def strategy_bandwidth(strategy):
    def extract(docs):
        out = []
        for d, base, r in strategy_rows(docs, strategy):
            if not base or not base.get("best_nt_bytes_per_s"):
                continue
            out += [100.0 * d["size_bytes"] / (ms / 1e3) / base["best_nt_bytes_per_s"] for ms in r["commit_samples_ms"]]
        return paired(out)

    return extract


def strategy_restore(strategy):
    def extract(docs):
        out = []
        for _, _, r in strategy_rows(docs, strategy):
            out += r.get("restore_samples_ms", [])
        return paired(out)

    return extract


def octree_ratio(op):
    """p4est time / PM-octree time at the largest size recorded, one value per repetition."""

    def extract(docs):
        out = []
        for d in docs:
            sizes = [s for s in d.get("sizes", []) if not s.get("skipped")]
            if not sizes:
                continue
            s = max(sizes, key=lambda s: (s["level"], -s["shift"]))
            for o in s.get("ops", []):
                if o["op"] == op:
                    out += [p / m for p, m in zip(o.get("p4est_runs", []), o.get("pm_runs", [])) if m > 0]
        return paired(out)

    return extract


def streams_ratio(mode, base):
    """Transfer (write + read) time of `base` over `mode`, the largest size recorded, one process."""

    def transfers(docs, m):
        rows = [r for d in docs for r in d.get("transfers", []) if r["processes"] == 1 and r["ok"]]
        if not rows:
            return [], 0
        big = max(r["size"] for r in rows)
        out = []
        for r in rows:
            if r["mode"] == m and r["size"] == big:
                out += [w + x for w, x in zip(r.get("write_samples_s", []), r.get("read_samples_s", []))]
        return out, big

    def extract(docs):
        a, _ = transfers(docs, base)
        b, _ = transfers(docs, mode)
        return ratio_of_medians(a, b)

    return extract


def workflow_ratio(mode, base, field):
    """base's field over mode's, one value per repetition (the couplings of a repetition run back to back)."""

    def extract(docs):
        out = []
        for d in docs:
            rows = {r["coupling"]: r for r in d.get("rows", [])}
            if mode not in rows or base not in rows:
                continue
            out += [b[field] / m[field] for b, m in zip(rows[base]["runs"], rows[mode]["runs"]) if m[field] > 0]
        return paired(out)

    return extract


def crashsim_rate(row):
    def extract(docs):
        out = []
        for d in docs:
            for r in d.get("rows", []) if isinstance(d, dict) else d:
                if r["row"] == row:
                    out += r.get("rates", [])
        return paired(out)

    return extract


def dist_added(ranks):
    """What the collective commit adds to a local commit's overhead: (collective - local) / (local - none)
    of the loop times, in %, from the medians of the three variants' runs (bootstrap)."""

    def extract(docs):
        sets = [[], [], []]
        for d in docs:
            for r in d.get("overhead", []):
                if r["ranks"] == ranks and r["level"] == "local" and not r.get("unavailable"):
                    for i, k in enumerate(("none_samples", "local_samples", "collective_samples")):
                        sets[i] += r.get(k, [])
        if not all(sets):
            return None

        def stat(none, local, collective):
            base = median(local) - median(none)
            return 100.0 * (median(collective) - median(local)) / base if base > 0 else float("inf")

        lo, hi = bootstrap_interval(stat, sets)
        return {"value": stat(*sets), "lo": lo, "hi": hi, "n": min(len(x) for x in sets), "method": "bootstrap"}

    return extract


def dist_recovery(kind):
    """Time from the kill to the restored job, the file checkpoint's over in-place's (bootstrap)."""

    def extract(docs):
        times = {"in-place": [], "file": []}
        for d in docs:
            for r in d.get("recovery", []):
                if r["kind"] == kind and r["strategy"] in times:
                    times[r["strategy"]] += r.get("restored_samples", [])
        return ratio_of_medians(times["file"], times["in-place"])

    return extract


def amr_restart(docs):
    """seed 000 §5.6: restart from an in-core run's snapshot over the PM-octree's restore (bootstrap)."""
    times = {"pm-octree": [], "snapshot": []}
    for d in docs:
        for r in d.get("restart", []):
            key = "pm-octree" if r["label"] == "pm-octree" else "snapshot" if "snapshot" in r["label"] else None
            if key:
                times[key] += r.get("seconds", [])
    return ratio_of_medians(times["snapshot"], times["pm-octree"])


def placement_ratio(app, variant):
    """seed 003: time per iteration with `variant` over native, one value per repetition."""

    def extract(docs):
        out = []
        for d in docs:
            rows = {r["variant"]: r for r in d.get("rows", []) if r["app"] == app and r["profile"] == "dram"}
            if "native" in rows and variant in rows:
                out += [v / n for n, v in zip(rows["native"]["samples_ms"], rows[variant]["samples_ms"]) if n > 0]
        return paired(out)

    return extract


def stream_ratio(kernel, persistence):
    """seed 003: STREAM bandwidth on pool memory over DRAM (dram profile), ratio of medians (bootstrap)."""

    def extract(docs):
        pool, dram = [], []
        for d in docs:
            for r in d.get("rows", []):
                if r["kernel"] != kernel or not r.get("valid", True) or r["profile"] not in ("dram", ""):
                    continue
                if r["memory"] == "DRAM":
                    dram += r.get("samples_gbps", [])
                elif r["persistence"] == persistence:
                    pool += r.get("samples_gbps", [])
        return ratio_of_medians(pool, dram)

    return extract


def gerris_overhead(variant):
    """Gerris's run time with `variant` over without persistence, in %, one value per round (the variants of a
    round run back to back), over every case recorded."""

    def extract(docs):
        out = []
        for d in docs:
            runs = {(r["case"], r["variant"]): r.get("runs_wall_s", []) for r in d.get("rows", []) if r["kind"] == "run"}
            for (case, v), walls in runs.items():
                if v == variant and (case, "none") in runs:
                    out += [100.0 * (w / n - 1.0) for n, w in zip(runs[(case, "none")], walls) if n > 0]
        return paired(out)

    return extract


def gerris_restart(docs):
    """Restart of a whole Gerris process from its binary snapshot over from cairn-octree (bootstrap); the
    JSON keeps the per-run restore times only as their median, so this is the resuming process's time."""
    snap, octree = [], []
    for d in docs:
        for r in d.get("rows", []):
            if r["kind"] == "restart" and r["variant"] == "snapshot-binary":
                snap += r.get("runs_wall_s", [])
            if r["kind"] == "restart" and r["variant"] == "cairn-octree":
                octree += r.get("runs_wall_s", [])
    return ratio_of_medians(snap, octree)


FIGURES = [
    # name, experiment, op, goal, unit, extract
    ("in-place overhead, jacobi (dram, 1 thread)", "overhead", "<=", 5, "%", overhead_figure("jacobi")),
    ("in-place overhead, npb-cg (dram, 1 thread)", "overhead", "<=", 5, "%", overhead_figure("npb-cg")),
    ("in-place overhead, npb-mg (dram, 1 thread)", "overhead", "<=", 5, "%", overhead_figure("npb-mg")),
    ("in-place overhead, sph (dram, 1 thread)", "overhead", "<=", 5, "%", overhead_figure("sph")),
    ("in-place overhead, median across the apps", "overhead", "<=", 2, "%", overhead_across_apps),
    ("restart from in-place vs from a file checkpoint (sph)", "checkpoint", ">=", 100, "x", restore_vs_file("in-place")),
    ("restart from shadow vs from a file checkpoint (sph)", "checkpoint", ">=", 100, "x", restore_vs_file("shadow")),
    ("in-place commit bandwidth, % of non-temporal copy (dram)", "strategies", ">=", 80, "%",
     strategy_bandwidth("in-place")),
    ("in-place restore (dram)", "strategies", "<=", 1, "ms", strategy_restore("in-place")),
    ("octree refine, p4est / PM-octree time", "octree", ">=", 1, "x", octree_ratio("refine")),
    ("octree 2:1 face balance, p4est / PM-octree", "octree", ">=", 2, "x", octree_ratio("balance-face")),
    ("octree 2:1 full balance, p4est / PM-octree", "octree", ">=", 2, "x", octree_ratio("balance-full")),
    ("octree traversal (read), p4est / PM-octree", "octree", ">=", 1, "x", octree_ratio("traverse-read")),
    ("octree traversal (write), p4est / PM-octree", "octree", ">=", 1, "x", octree_ratio("traverse-write")),
    ("octree full persist vs p8est_save, p4est / PM-octree", "octree", ">=", 10, "x", octree_ratio("save")),
    ("pmem: stream transfer vs file on tmpfs (1 process)", "streams", ">=", 2, "x", streams_ratio("pmem", "file-tmpfs")),
    ("pmem: stream transfer vs file with fsync (1 process)", "streams", ">=", 10, "x",
     streams_ratio("pmem", "file-disk-fsync")),
    ("workflow transfers, pmem vs files on tmpfs", "workflow", ">=", 2, "x",
     workflow_ratio("pmem", "file-tmpfs", "transfer_s")),
    ("workflow total time, pmem vs files on disk", "workflow", ">=", 1.2, "x",
     workflow_ratio("pmem", "file-disk", "total_s")),
    ("crash states per second, in-process checks (1 MiB)", "crashsim", ">=", 100000, "/s",
     crashsim_rate("inproc-1m")),
    ("crash states per second, forked full recovery (16 MiB)", "crashsim", ">=", 1000, "/s",
     crashsim_rate("forked-16m")),
    ("seed 000: restart, in-core + snapshot / PM-octree restore (amr)", "amr", None, None, "x", amr_restart),
    ("seed 003: jacobi, arrays in the pool without persistence / in DRAM", "placement", None, None, "x",
     placement_ratio("jacobi", "pool-no-persist")),
    ("seed 003: jacobi persisted in place every iteration / native", "placement", None, None, "x",
     placement_ratio("jacobi", "in-place")),
    ("seed 003: STREAM triad on the pool, non-temporal persist / DRAM", "stream", None, None, "x",
     stream_ratio("triad", "nt")),
    ("dist: what the collective commit adds to a local commit's overhead (2 ranks)", "dist", "<=", 5, "%",
     dist_added(2)),
    ("dist: kill to restored job, file checkpoint / in-place (cairn launch)", "dist", None, None, "x",
     dist_recovery("kill")),
    ("Gerris: run time persisting every step (cairn-octree) over none", "gerris", "<=", 5, "%",
     gerris_overhead("cairn-octree")),
    ("Gerris: restart from a binary snapshot / from cairn-octree, whole process", "gerris", None, None, "x",
     gerris_restart),
]


# ------------------------------------------------------------------ recordings

NAME = re.compile(r"^(?P<exp>[a-z0-9]+)-(?P<date>\d{4}-\d{2}-\d{2})-(?P<time>\d{4}(?:\d{2})?)\.json$")


def recordings(results_dir):
    """experiment -> [(date, time, parsed JSON)], oldest first."""
    out = {}
    for path in sorted(glob.glob(os.path.join(results_dir, "*.json"))):
        m = NAME.match(os.path.basename(path))
        if not m:
            continue
        with open(path) as f:
            doc = json.load(f)
        out.setdefault(m["exp"], []).append((m["date"], m["time"], doc))
    for recs in out.values():
        recs.sort(key=lambda r: (r[0], r[1]))
    return out


def number(x, unit):
    if x is None or not math.isfinite(x):
        return "-"
    a = abs(x)
    if unit == "/s":
        return f"{x:,.0f}"
    if a >= 100:
        return f"{x:.0f}"
    if a >= 10:
        return f"{x:.1f}"
    if a >= 1:
        return f"{x:.2f}"
    return f"{x:.3f}"


def with_unit(text, unit):
    if unit == "%":
        return text + " %"
    if unit == "x":
        return text + "x"
    if unit == "ms":
        return text + " ms"
    if unit == "/s":
        return text + "/s"
    return text


def evaluate(results_dir):
    """One dict per figure: name, goal, value, interval, verdict, dates, command."""
    recs = recordings(results_dir)
    rows = []
    for name, exp, op, goal, unit, extract in FIGURES:
        docs = [r[2] for r in recs.get(exp, [])]
        fig = extract(docs) if docs else None
        dates = sorted({r[0] for r in recs.get(exp, [])})
        rows.append(
            {
                "name": name,
                "experiment": exp,
                "op": op,
                "goal": goal,
                "unit": unit,
                "figure": fig,
                "verdict": verdict(fig, op, goal) if op else ("no goal" if fig else "not recorded"),
                "recordings": len(docs),
                "dates": dates,
                "command": COMMANDS[exp],
            }
        )
    return rows


def table(rows):
    out = [
        "| figure | goal | current: median [95 % interval] | verdict | recorded | command |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        goal = f"{'≥' if r['op'] == '>=' else '≤'} {with_unit(number(r['goal'], r['unit']), r['unit'])}" if r["op"] else "-"
        fig = r["figure"]
        if fig:
            current = (
                f"**{with_unit(number(fig['value'], r['unit']), r['unit'])}** "
                f"[{number(fig['lo'], r['unit'])}, {number(fig['hi'], r['unit'])}], n = {fig['n']}"
            )
        else:
            current = "-"
        if r["recordings"]:
            when = f"{', '.join(r['dates'])} ({r['recordings']} run{'s' if r['recordings'] != 1 else ''})"
        else:
            when = "-"
        out.append(f"| {r['name']} | {goal} | {current} | {r['verdict']} | {when} | `{r['command']}` |")
    return "\n".join(out) + "\n"


def load_note(recs):
    """Cores and load average over the recordings that carry them."""
    loads, cores = [], set()
    for exp_recs in recs.values():
        for _, _, doc in exp_recs:
            r = doc.get("recorded") if isinstance(doc, dict) else None
            if not r:
                continue
            loads += [x for x in (r.get("load_before"), r.get("load_after")) if x is not None]
            if r.get("nproc"):
                cores.add(r["nproc"])
    if not loads:
        return ""
    n = "/".join(str(c) for c in sorted(cores)) or "?"
    return (f"\nRecorded on {n} cores with a load average of {min(loads):.1f}-{max(loads):.1f} (before and after each "
            "recording; the machine is shared with other builds): read an interval as this noise, not as the code's.\n")


def page_block(rows, recs):
    return BEGIN + "\n" + table(rows) + load_note(recs) + END


def replace_block(page, block):
    a, b = page.find(BEGIN), page.find(END)
    if a < 0 or b < a:
        raise SystemExit(f"report.py: the page has no {BEGIN} ... {END} block")
    return page[:a] + block + page[b + len(END) :]


def current_block(page):
    a, b = page.find(BEGIN), page.find(END)
    if a < 0 or b < a:
        return None
    return page[a : b + len(END)]


# ------------------------------------------------------------------ plots


def plot_all(rows, recs, plots_dir):
    try:
        import matplotlib
    except ImportError:
        # A python3 first on PATH (pyenv, a venv) may lack Debian's python3-matplotlib, which the system
        # interpreter has: run again with that one (the table it writes is the same).
        system = "/usr/bin/python3"
        if os.path.exists(system) and os.path.realpath(sys.executable) != os.path.realpath(system):
            os.execv(system, [system, os.path.abspath(__file__)] + sys.argv[1:])
        print("report.py: matplotlib not found (python3-matplotlib): no plots", file=sys.stderr)
        return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sys.path.insert(0, HERE)
    import plot

    os.makedirs(plots_dir, exist_ok=True)
    shown = [r for r in rows if r["figure"] and r["op"]]
    if shown:
        fig, ax = plt.subplots(figsize=(9, 0.42 * len(shown) + 1.2))
        for i, r in enumerate(shown):
            f, g = r["figure"], r["goal"]
            # Distance from the goal in the goal's direction: above 1 meets it.
            if r["unit"] == "%" and r["op"] == "<=":
                scale = lambda x: (g + 100.0) / (x + 100.0)  # noqa: E731  (overheads: times relative to native)
            elif r["op"] == ">=":
                scale = lambda x: x / g  # noqa: E731
            else:
                scale = lambda x: g / x if x > 0 else float("inf")  # noqa: E731
            v, a, b = scale(f["value"]), scale(f["lo"]), scale(f["hi"])
            lo, hi = min(a, b), max(a, b)
            color = {"met": "tab:green", "missed": "tab:red"}.get(r["verdict"], "tab:orange")
            ax.errorbar([v], [i], xerr=[[v - lo], [hi - v]], fmt="o", color=color, capsize=3)
        ax.axvline(1.0, color="black", lw=0.8)
        ax.set_xscale("log")
        ax.set_yticks(range(len(shown)))
        ax.set_yticklabels([r["name"] for r in shown], fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel("measured / goal, in the goal's direction (right of 1: met); 95 % intervals")
        ax.set_title("cairn's headline figures (bench/report.py)")
        fig.tight_layout()
        fig.savefig(os.path.join(plots_dir, "figures.png"), dpi=110)
        plt.close(fig)
    # One plot per experiment from its newest recording, where plot.py draws it.
    drawers = {
        "overhead": plot.plot_overhead,
        "placement": plot.plot_placement,
        "stream": plot.plot_stream,
        "amr": plot.plot_amr,
        "streams": plot.plot_streams,
        "workflow": plot.plot_workflow,
    }
    for exp, draw in drawers.items():
        if exp in recs:
            draw(recs[exp][-1][2], os.path.join(plots_dir, f"current-{exp}.png"))
    if "checkpoint" in recs and recs["checkpoint"][-1][2].get("fig10", {}).get("rows"):
        plot.plot_threads(recs["checkpoint"][-1][2]["fig10"], os.path.join(plots_dir, "current-checkpoint-threads.png"))


# ------------------------------------------------------------------ main


def load_average():
    try:
        with open("/proc/loadavg") as f:
            return float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def record(exp, cairn, results_dir):
    """Runs EXP's command once; its JSON goes to bench/results/EXP-DATE-TIME.json with a "recorded" object
    (the command, the machine's cores and its load average before and after) added at the top level."""
    if exp not in COMMANDS:
        raise SystemExit(f"report.py: unknown experiment {exp}; known: {', '.join(COMMANDS)}")
    now = datetime.datetime.now(datetime.timezone.utc)
    path = os.path.join(results_dir, f"{exp}-{now:%Y-%m-%d-%H%M%S}.json")
    args = COMMANDS[exp].split()
    if args[0] == "cairn":
        args[0] = cairn
    else:  # the crash harness's tool, built beside the cairn tool's build tree
        args[0] = os.path.join(os.path.dirname(os.path.abspath(cairn)), "..", "..", "tests", "crashsim", args[0])
    os.makedirs(results_dir, exist_ok=True)
    print(" ".join(args + ["--json", path]), file=sys.stderr)
    before = load_average()
    subprocess.run(args + ["--json", path], check=True)
    after = load_average()
    with open(path) as f:
        doc = json.load(f)
    recorded = {"command": COMMANDS[exp], "nproc": os.cpu_count(), "load_before": before, "load_after": after,
                "utc": f"{now:%Y-%m-%d %H:%M}"}
    doc = {"recorded": recorded, **doc} if isinstance(doc, dict) else {"recorded": recorded, "rows": doc}
    with open(path, "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    return path


def main(argv):
    opts = {"--results": os.path.join(HERE, "results"), "--page": os.path.join(HERE, "RESULTS.md"),
            "--plots": os.path.join(HERE, "plots"), "--record": None, "--cairn": None}
    flags = set()
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in opts and i + 1 < len(argv):
            opts[a] = argv[i + 1]
            i += 2
        elif a in ("--check", "--table", "--no-plots"):
            flags.add(a)
            i += 1
        else:
            print(__doc__, file=sys.stderr)
            return 2
    if opts["--record"]:
        if not opts["--cairn"]:
            raise SystemExit("report.py: --record needs --cairn PATH (the built cairn tool)")
        print(record(opts["--record"], opts["--cairn"], opts["--results"]))
        return 0
    rows = evaluate(opts["--results"])
    block = page_block(rows, recordings(opts["--results"]))
    if "--table" in flags:
        sys.stdout.write(table(rows))
        return 0
    with open(opts["--page"]) as f:
        page = f.read()
    if "--check" in flags:
        if current_block(page) != block:
            print(f"{opts['--page']}: the figures table is not the one {opts['--results']} gives; "
                  "run python3 bench/report.py and commit the page", file=sys.stderr)
            return 1
        return 0
    new = replace_block(page, block)
    if new != page:
        with open(opts["--page"], "w") as f:
            f.write(new)
    if "--no-plots" not in flags:
        plot_all(rows, recordings(opts["--results"]), opts["--plots"])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
