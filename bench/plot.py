#!/usr/bin/env python3
"""plot.py — PNG figures from the JSON that `cairn bench NAME --json FILE` writes.

Usage:
  python3 bench/plot.py overhead   overhead.json   overhead.png     overhead per strategy (seed 004 Fig. 12)
  python3 bench/plot.py placement placement.json placement.png   time per iteration vs native (seed 003)
  python3 bench/plot.py stream  stream.json  stream.png    STREAM bandwidth per memory and persistence
  python3 bench/plot.py threads fig10.json   fig10.png     throughput vs threads (e.g. seed 001 Fig. 10)
  python3 bench/plot.py streams streams.json streams.png   stream transfers and preallocation (seed 002 Figs. 3-5)
  python3 bench/plot.py workflow workflow.json workflow.png  the solve-adapt workflow per coupling (seed 002)
  python3 bench/plot.py amr     amr.json     amr.png       seed 000's Figs. 3, 10, 11 and restart (cairn bench amr)

overhead and placement read the "rows" the app experiments write (profile, threads,
app, variant, label, time_per_iteration_ms, overhead_pct, vs_baseline,
verified_runs); one panel per device profile and thread count, one group of
bars per app, one bar per variant. A bar of a variant with a failed run is
hatched.

threads reads any {"rows": [{"threads": T, "variant": V, "throughput": X,
"oversubscribed": bool}, ...]} (optional "unit" at the top level): one line
per variant; oversubscribed points (more threads than cores) are drawn hollow
and the region is shaded.

Only matplotlib is needed (the Agg backend: no display).
"""
import json
import os
import sys

try:
    import matplotlib
except ImportError:
    # A python3 first on PATH (pyenv, a venv) may lack the Debian package
    # python3-matplotlib, which the system interpreter has: use that one.
    if os.path.exists("/usr/bin/python3") and os.path.realpath(sys.executable) != os.path.realpath("/usr/bin/python3"):
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    raise

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def load(path):
    with open(path) as f:
        return json.load(f)


def panels(rows):
    """(profile, threads) pairs in the order they appear."""
    seen = []
    for r in rows:
        key = (r.get("profile", ""), r.get("threads", 0))
        if key not in seen:
            seen.append(key)
    return seen


def ordered(rows, field):
    out = []
    for r in rows:
        if r[field] not in out:
            out.append(r[field])
    return out


def grouped_bars(ax, rows, value, ylabel, baseline_line):
    apps = ordered(rows, "app")
    variants = [v for v in ordered(rows, "variant")]
    labels = {r["variant"]: r.get("label", r["variant"]) for r in rows}
    width = 0.8 / max(1, len(variants))
    cmap = plt.get_cmap("tab10")
    for k, v in enumerate(variants):
        xs, ys, bad = [], [], []
        for i, app in enumerate(apps):
            match = [r for r in rows if r["app"] == app and r["variant"] == v]
            if not match:
                continue
            r = match[0]
            xs.append(i + (k - (len(variants) - 1) / 2) * width)
            ys.append(value(r))
            bad.append(r.get("verified_runs", 1) < r.get("runs", 1))
        bars = ax.bar(xs, ys, width, label=labels[v], color=cmap(k % 10))
        for b, is_bad in zip(bars, bad):
            if is_bad:
                b.set_hatch("xx")
    ax.set_xticks(range(len(apps)))
    ax.set_xticklabels([f'{a}\n{next(r["size"] for r in rows if r["app"] == a)}' for a in apps])
    ax.set_ylabel(ylabel)
    if baseline_line is not None:
        ax.axhline(baseline_line, color="black", linewidth=0.8)
    ax.grid(axis="y", alpha=0.3)


def plot_overhead(data, out):
    rows = data["rows"]
    keys = panels(rows)
    fig, axes = plt.subplots(len(keys), 1, figsize=(11, 4.2 * len(keys)), squeeze=False)
    for ax, (profile, threads) in zip(axes[:, 0], keys):
        sub = [r for r in rows if r["profile"] == profile and r["threads"] == threads and not r.get("baseline")]
        grouped_bars(ax, sub, lambda r: r["overhead_pct"], "overhead vs native (%)", 0)
        ax.axhline(2, color="grey", linestyle="--", linewidth=0.8)
        ax.axhline(5, color="grey", linestyle=":", linewidth=0.8)
        # Overheads span orders of magnitude (in-place a few %, copies hundreds).
        if max((r["overhead_pct"] for r in sub), default=0) > 50:
            ax.set_yscale("symlog", linthresh=10)
        ax.set_title(f"every-iteration persistence, profile {profile}, {threads} app thread(s)"
                     " (dashed: 2 %, dotted: 5 %)")
        ax.legend(fontsize=8, ncol=3)
    fig.suptitle(f'seed 004 Fig. 12 on {data.get("cpu_model", "?")} ({data.get("nproc", "?")} hw threads), '
                 f'medians of {data.get("repeats", "?")}')
    fig.tight_layout()
    fig.savefig(out, dpi=120)


def plot_placement(data, out):
    rows = data["rows"]
    profiles = ordered(rows, "profile")
    fig, axes = plt.subplots(len(profiles), 1, figsize=(10, 4 * len(profiles)), squeeze=False)
    for ax, profile in zip(axes[:, 0], profiles):
        sub = [r for r in rows if r["profile"] == profile]
        grouped_bars(ax, sub, lambda r: r["vs_baseline"], "time per iteration / native", 1)
        ax.set_title(f"profile {profile}: time per iteration relative to native (DRAM, no persistence)")
        ax.legend(fontsize=8, ncol=3)
    fig.suptitle(f'seed 003 kernels on {data.get("cpu_model", "?")}, medians of {data.get("repeats", "?")}')
    fig.tight_layout()
    fig.savefig(out, dpi=120)


def plot_stream(data, out):
    rows = data["rows"]
    kernels = ordered(rows, "kernel")
    configs = []
    for r in rows:
        name = "DRAM" if r["memory"] == "DRAM" else f'pool {r["profile"]}, {r["persistence"]}'
        if name not in configs:
            configs.append(name)
    fig, ax = plt.subplots(figsize=(11, 4.5))
    width = 0.8 / len(configs)
    cmap = plt.get_cmap("tab20")
    for k, name in enumerate(configs):
        ys = []
        for kern in kernels:
            match = [r for r in rows if r["kernel"] == kern and
                     ("DRAM" if r["memory"] == "DRAM" else f'pool {r["profile"]}, {r["persistence"]}') == name]
            ys.append(match[0]["median_gbps"] if match else 0)
        ax.bar([i + (k - (len(configs) - 1) / 2) * width for i in range(len(kernels))], ys, width, label=name,
               color=cmap(k % 20))
    ax.set_xticks(range(len(kernels)))
    ax.set_xticklabels(kernels)
    ax.set_ylabel("GB/s (median)")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    ax.set_title(f'STREAM, {data.get("threads", "?")} threads, arrays of {data.get("array_bytes", 0) / 2**20:.0f} MiB')
    fig.tight_layout()
    fig.savefig(out, dpi=120)


def plot_threads(data, out):
    data = data.get("fig10", data)  # `cairn bench checkpoint` nests Fig. 10 under "fig10"
    rows = data["rows"]
    unit = data.get("unit", "throughput")
    fig, ax = plt.subplots(figsize=(8, 5))
    cmap = plt.get_cmap("tab10")
    over = [r["threads"] for r in rows if r.get("oversubscribed")]
    if over:
        first = min(over)
        below = [r["threads"] for r in rows if not r.get("oversubscribed") and r["threads"] < first]
        start = max(below) if below else first
        ax.axvspan(start + (first - start) / 2 if below else first * 0.9, max(over) * 1.1, color="grey", alpha=0.12,
                   label="oversubscribed (threads > cores)")
    for k, v in enumerate(ordered(rows, "variant")):
        pts = sorted((r["threads"], r["throughput"], bool(r.get("oversubscribed"))) for r in rows if r["variant"] == v)
        color = cmap(k % 10)
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "-", color=color, label=v)
        for t, y, o in pts:
            ax.plot([t], [y], "o", color=color, markerfacecolor="white" if o else color)
    ts = sorted({r["threads"] for r in rows})
    ax.set_xscale("log", base=2)
    ax.set_xticks(ts)
    ax.set_xticklabels([str(t) for t in ts])
    ax.set_xlabel("threads (hollow markers: oversubscribed)")
    ax.set_ylabel(unit)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(data.get("title", "throughput vs threads"))
    fig.tight_layout()
    fig.savefig(out, dpi=120)


def plot_streams(data, out):
    """Left: write+read time per transfer against size, one line per mode, one
    process. Right: seed 002's Fig. 5, effective write bandwidth against size
    with and without preallocation."""
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(13, 5))
    cmap = plt.get_cmap("tab10")
    rows = [r for r in data["transfers"] if r["processes"] == 1 and r["ok"]]
    for k, mode in enumerate(ordered(rows, "mode")):
        pts = sorted((r["size"], (r["write_s"] + r["read_s"]) * 1e3) for r in rows if r["mode"] == mode)
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", color=cmap(k % 10), label=mode)
    by_size = {}
    for r in rows:
        if r["memcpy_gbps"] > 0:
            by_size.setdefault(r["size"], []).append(2 * r["size"] / (r["memcpy_gbps"] * 1e9) * 1e3)
    memcpy = [(size, sorted(ts)[len(ts) // 2]) for size, ts in sorted(by_size.items())]  # median over the modes' runs
    if memcpy:
        ax.plot([p[0] for p in memcpy], [p[1] for p in memcpy], "k--", label="2 x memcpy (reference)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("bytes per process")
    ax.set_ylabel("write + read, ms (median)")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    ax.set_title("one transfer: open+write+close, open+read+close (1 process)")
    pre = data["prealloc"]
    for k, mode in enumerate(ordered(pre, "mode")):
        pts = sorted((r["size"], r["gbps"]) for r in pre if r["mode"] == mode)
        style = "-" if ("prealloc" in mode or mode == "fmemopen") else "--"
        bx.plot([p[0] / 2**20 for p in pts], [p[1] for p in pts], style, marker=".", color=cmap(k % 10), label=mode)
    bx.set_xscale("log", base=2)
    bx.set_xlabel("MiB written (64 KiB fwrite calls)")
    bx.set_ylabel("effective write bandwidth, GB/s")
    bx.grid(alpha=0.3, which="both")
    bx.legend(fontsize=8)
    bx.set_title("preallocation (seed 002 Fig. 5); dashed: growing buffers")
    fig.tight_layout()
    fig.savefig(out, dpi=120)


def plot_workflow(data, out):
    """The whole workflow per coupling: median total time split into transfers,
    compute and the rest (process start, waits), stacked."""
    rows = data["rows"]
    fig, ax = plt.subplots(figsize=(8, 4))
    names = [r["coupling"] for r in rows]
    left = [0.0] * len(rows)
    for field, label, color in (("transfer_s", "transfers (open, read/write, close, commit)", "tab:red"),
                                ("compute_s", "compute", "tab:blue"),
                                ("launch_s", "process start and waits", "tab:gray")):
        vals = [max(r[field], 0.0) for r in rows]
        ax.barh(names, vals, left=left, color=color, label=label)
        left = [a + b for a, b in zip(left, vals)]
    for k, r in enumerate(rows):
        ax.text(left[k], k, f"  {r['total_s']:.2f} s, {100 * r['transfer_s'] / r['total_s']:.1f} % transfers",
                va="center", fontsize=8)
    ax.set_xlim(0, max(left) * 1.45)
    ax.invert_yaxis()
    ax.set_xlabel("seconds (median of %d runs)" % data["repeats"])
    ax.set_title("solve-adapt workflow, %d cycles, %d parts, levels %d-%d" %
                 (data["cycles"], data["parts"], data["level_min"], data["level_max"]))
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(out, dpi=120)


def plot_amr(data, out):
    """Seed 000 on the adaptive interface app: the two versions (Fig. 3), run
    time against C0 (Fig. 10), the layout transformation (Fig. 11) and the
    restart after a kill (5.6)."""
    fig, axes = plt.subplots(2, 2, figsize=(12, 8))
    ax = axes[0][0]
    v = data.get("versions", [])
    if v:
        steps = [x["step"] for x in v]
        ax.plot(steps, [100 * x["overlap"] for x in v], color="tab:blue", label="overlap of V(i-1) and V(i), %")
        ax.set_ylabel("overlap, %")
        ax.set_ylim(0, 100)
        bx = ax.twinx()
        bx.plot(steps, [x["both_bytes"] / x["single_bytes"] for x in v], color="tab:red", label="both versions / one")
        bx.set_ylabel("memory of both versions / one copy", color="tab:red")
        bx.set_ylim(0, 2.5)
        ax.set_xlabel("step")
        ax.set_title("Fig. 3: two versions after each persist (level %d)" % data["size"])
        ax.legend(loc="lower left", fontsize=8)
    ax = axes[0][1]
    rows = data.get("c0", [])
    if rows:
        base = rows[0]["median_s"]
        ax.bar(range(len(rows)), [r["median_s"] / base for r in rows],
               color=["tab:gray", "tab:brown"] + ["tab:blue"] * (len(rows) - 2))
        ax.set_xticks(range(len(rows)))
        ax.set_xticklabels([r["label"].replace("pm-octree ", "") for r in rows], rotation=20, fontsize=8)
        ax.set_ylabel("run time / in-core")
        ax.axhline(1, color="k", lw=0.5)
        ax.set_title("Fig. 10: run time against C0 (%s)" % data["profile"])
    ax = axes[1][0]
    rows = data.get("transform", [])
    if rows:
        sizes = sorted({r["size"] for r in rows})
        for k, label in enumerate(("transformation off", "transformation on")):
            pts = [next((r for r in rows if r["size"] == s and r["label"] == label), None) for s in sizes]
            ax.bar([i + 0.4 * k for i in range(len(sizes))], [p["nvm_store_bytes"] / 1e6 if p else 0 for p in pts],
                   width=0.4, label=label + " (NVM writes)")
        ax.set_xticks([i + 0.2 for i in range(len(sizes))])
        ax.set_xticklabels(["level %d" % s for s in sizes])
        ax.set_ylabel("MB stored into NVM blocks")
        ax.set_yscale("log")
        ax.legend(fontsize=8)
        ax.set_title("Fig. 11: layout transformation, C0 = 1/8 of the tree")
    ax = axes[1][1]
    rows = data.get("restart", [])
    if rows:
        ax.barh([r["label"] for r in rows], [r["median_s"] for r in rows], color="tab:green")
        ax.set_xscale("log")
        ax.set_xlabel("seconds until the restarted run is back at step %d" % data["crash_at"])
        ax.set_title("5.6: restart after SIGKILL")
    fig.tight_layout()
    fig.savefig(out, dpi=120)


KINDS = {"amr": plot_amr, "workflow": plot_workflow, "streams": plot_streams, "overhead": plot_overhead, "placement": plot_placement, "stream": plot_stream, "threads": plot_threads}


def main(argv):
    if len(argv) != 4 or argv[1] not in KINDS:
        sys.stderr.write(__doc__)
        return 2
    KINDS[argv[1]](load(argv[2]), argv[3])
    print(f"wrote {argv[3]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
