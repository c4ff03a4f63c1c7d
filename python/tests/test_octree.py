# test_octree.py — cairn.Octree in bulk: leaves as numpy arrays, refine/coarsen by boolean masks,
# balance, persist and a restore in a fresh process equal bit for bit; typed errors for masks of
# the wrong length and for a damaged pool.
import os
import subprocess
import sys

import numpy as np
import pytest

import cairn

# The child: builds a 2D mesh through every bulk call, persists it twice and prints the
# checksum; the leaves (coordinates, levels, payloads) go to a .npz for the parent.
BUILD = r"""
import sys, numpy as np, cairn
path, out = sys.argv[1], sys.argv[2]
dt = np.dtype([("u", np.float64), ("id", np.int32), ("pad", np.int32)])
with cairn.Octree.create(path, dims=2, payload=dt) as t:
    t.uniform(3)
    c, lv, p = t.leaves()
    x = (c[:, 0] + 0.5 * 2.0 ** (cairn.MAX_LEVEL - lv)) / 2.0 ** cairn.MAX_LEVEL
    y = (c[:, 1] + 0.5 * 2.0 ** (cairn.MAX_LEVEL - lv)) / 2.0 ** cairn.MAX_LEVEL
    p["u"] = np.exp(-40 * ((x - 0.3) ** 2 + (y - 0.6) ** 2))
    p["id"] = np.arange(len(p))
    t.write_payloads(p)
    assert t.persist() == 1
    assert t.refine(t.payloads()["u"] > 0.3) > 0
    t.balance("full")
    c, lv, p = t.leaves()
    coarse = (lv == 3) & (c[:, 0] >= 2 ** (cairn.MAX_LEVEL - 1))   # the right half, where nothing was refined
    assert t.coarsen(coarse) > 0
    t.root_payload = np.array((7.5, 42, 0), dt)
    assert t.persist() == 2
    c, lv, p = t.leaves()
    np.savez(out, coords=c, levels=lv, payloads=p.view(np.uint8).reshape(len(p), -1))
    print(t.checksum(), len(t), flush=True)
"""


def test_round_trip_in_a_fresh_process(pool_dir):
    path, out = os.path.join(pool_dir, "mesh.pool"), os.path.join(pool_dir, "leaves.npz")
    res = subprocess.run([sys.executable, "-c", BUILD, path, out], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    checksum, count = (int(w) for w in res.stdout.split())
    want = np.load(out)
    dt = np.dtype([("u", np.float64), ("id", np.int32), ("pad", np.int32)])
    with cairn.Octree.open(path, dims=2, payload=dt) as t:  # this process never saw the tree
        assert t.version == 2 and len(t) == count and t.checksum() == checksum
        c, lv, p = t.leaves()
        assert c.dtype == np.uint32 and c.shape == (count, 2) and lv.dtype == np.uint8
        assert c.tobytes() == want["coords"].tobytes()
        assert lv.tobytes() == want["levels"].tobytes()
        assert p.tobytes() == want["payloads"].tobytes()
        assert t.root_payload["u"] == 7.5 and t.root_payload["id"] == 42
        assert 3 < lv.max() and lv.min() == 2  # refined where u > 0.3, coarsened on the right
        t.verify()
        # The working version changes; the persisted one stays until the next persist.
        t.write_payloads(np.zeros(count, dt))
        assert t.checksum() != checksum
    with cairn.Octree.open(path, dims=2, payload=dt) as t:
        assert t.checksum() == checksum


def test_masks_and_payloads(pool_dir):
    with cairn.Octree.create(os.path.join(pool_dir, "m.pool"), dims=3, payload=8) as t:
        assert len(t) == 1 and t.payload_dtype is None and t.payload_size == 8
        t.uniform(1)
        assert len(t) == 8
        raw = np.arange(64, dtype=np.uint8).reshape(8, 8)
        t.write_payloads(raw)
        assert t.payloads().tobytes() == raw.tobytes()
        mask = np.zeros(8, bool)
        mask[[0, 5]] = True
        assert t.refine(mask) == 2
        c, lv, p = t.leaves()
        assert len(lv) == 22 and list(lv[:9]) == [2] * 8 + [1]
        assert (p[:8] == raw[0]).all()  # children take their parent's payload
        with pytest.raises(cairn.InvalidArgumentError) as e:
            t.refine(np.ones(21, bool))
        assert "21" in str(e.value) and "22 leaves" in str(e.value)
        with pytest.raises(cairn.InvalidArgumentError):
            t.coarsen(np.ones((22, 1), bool))
        with pytest.raises(cairn.InvalidArgumentError) as e:
            t.coarsen(np.ones(22, np.float64))
        assert "bool" in str(e.value)
        with pytest.raises(cairn.InvalidArgumentError):
            t.write_payloads(np.zeros((21, 8), np.uint8))
        # A family is coarsened only when all its leaves are marked.
        half = np.zeros(22, bool)
        half[:8] = True
        half[9:12] = True  # 3 of the second family's 8
        assert t.coarsen(half) == 1 and len(t) == 15
        assert t.coarsen(np.ones(15, bool)) == 1 and len(t) == 8
        with pytest.raises(cairn.InvalidArgumentError):
            t.balance("sideways")
    with pytest.raises(cairn.InvalidArgumentError):
        cairn.Octree.create(os.path.join(pool_dir, "d.pool"), dims=4)
    with pytest.raises(cairn.NotReadyError):
        t.checksum()


def test_other_layout_and_missing_pool(pool_dir):
    path = os.path.join(pool_dir, "l.pool")
    with cairn.Octree.create(path, dims=2, payload=np.float32) as t:
        t.uniform(2)
        t.persist()
    with pytest.raises(cairn.LayoutMismatchError):
        cairn.Octree.open(path, dims=3, payload=np.float32)
    with pytest.raises(cairn.LayoutMismatchError):
        cairn.Octree.open(path, dims=2, payload=np.float64)
    with pytest.raises(cairn.AlreadyExistsError):
        cairn.Octree.create(path, dims=2, payload=np.float32)
    with pytest.raises(cairn.NotFoundError):
        cairn.Octree.open(os.path.join(pool_dir, "absent.pool"), dims=2)


def test_damaged_pool_is_corrupted(pool_dir):
    path = os.path.join(pool_dir, "bad.pool")
    n = 64
    stamp = np.frombuffer(b"".join(b"cairn-leaf%05d|" % i for i in range(n)), np.uint8).reshape(n, 16)
    with cairn.Octree.create(path, dims=2, payload=16, dram_budget=0) as t:
        t.uniform(3)
        t.write_payloads(stamp)
        t.persist()
    data = bytearray(open(path, "rb").read())
    needle = b"cairn-leaf00037|"
    at = data.find(needle)
    assert at >= 0
    while at >= 0:  # every copy of that leaf's payload in the pool
        data[at + 3] ^= 0x20
        at = data.find(needle, at + 1)
    open(path, "wb").write(data)
    with pytest.raises(cairn.CorruptedError) as e:
        with cairn.Octree.open(path, dims=2, payload=16) as t:
            t.leaves()  # the damage shows when its block is first read, at the latest
    assert path in str(e.value)


# The child: one adaptation step per persist (the step counter in the root payload); after
# persisting step KILL_AT it adapts again, prints "adapted" and waits on stdin for the SIGKILL.
ADAPT = r"""
import sys, numpy as np, cairn
path, steps, kill_at = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
try:
    t = cairn.Octree.open(path, dims=3, payload=np.float64)
except cairn.NotFoundError:
    t = cairn.Octree.create(path, dims=3, payload=np.float64)
    t.uniform(2)
    t.root_payload = 0.0
    t.persist()
step = int(t.root_payload[0])
print("start", step, t.checksum(), flush=True)
while step < steps:
    c, lv, p = t.leaves()
    centre = (c + 0.5 * 2.0 ** (cairn.MAX_LEVEL - lv)[:, None]) / 2.0 ** cairn.MAX_LEVEL
    r = np.linalg.norm(centre - (0.2 + 0.05 * step), axis=1)
    t.write_payloads(r)
    t.refine((r < 0.15) & (lv < 5))
    t.coarsen(t.leaves().payloads > 0.3)
    t.balance("face")
    step += 1
    t.root_payload = float(step)
    t.persist()
    print("persisted", step, t.checksum(), flush=True)
    if step == kill_at:
        t.refine(np.ones(len(t), bool))  # an unpersisted change the kill must lose
        print("adapted", flush=True)
        sys.stdin.read()
"""


def test_sigkill_after_a_persist_resumes_there(pool_dir):
    path, steps, kill_at = os.path.join(pool_dir, "adapt.pool"), 8, 5
    args = [sys.executable, "-c", ADAPT, path, str(steps)]
    child = subprocess.Popen(args + [str(kill_at)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    lines = []
    for line in child.stdout:
        lines.append(line.split())
        if line.startswith("adapted"):
            child.kill()
            break
    child.wait()
    assert child.returncode == -9 and lines[-1] == ["adapted"]
    persisted = {int(w[1]): int(w[2]) for w in lines if w[0] == "persisted"}
    resumed = subprocess.run(args + ["0"], stdin=subprocess.DEVNULL, capture_output=True, text=True, check=True)
    out = [ln.split() for ln in resumed.stdout.splitlines()]
    assert out[0] == ["start", str(kill_at), str(persisted[kill_at])]  # the persisted tree, not the refinement after it
    # An uninterrupted run gives the same tree at every step, the resumed one included.
    plain_path = os.path.join(pool_dir, "plain.pool")
    plain = subprocess.run([sys.executable, "-c", ADAPT, plain_path, str(steps), "0"], stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, check=True)
    want = {int(w[1]): int(w[2]) for w in (ln.split() for ln in plain.stdout.splitlines()) if w[0] == "persisted"}
    got = {**persisted, **{int(w[1]): int(w[2]) for w in out if w[0] == "persisted"}}
    assert got == want and len(want) == steps
