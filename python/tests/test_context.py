# test_context.py — cairn.Context: a round trip under every strategy, numpy views that are the
# persistent memory and stay the same objects at the same addresses across restore.
import numpy as np
import pytest

import cairn


def make(pool_dir, strategy, name="rt"):
    ctx = cairn.Context(name, strategy=strategy, dir=pool_dir, threads=1)
    u = ctx.dual_region("u", (16, 8))
    cells = ctx.region("cells", 100, np.int32)
    ctx.open()
    return ctx, u, cells


@pytest.mark.parametrize("strategy", cairn.strategies())
def test_round_trip_every_strategy(pool_dir, strategy):
    rng = np.random.default_rng(7)
    want_u = rng.random((16, 8))
    want_cells = rng.integers(-1000, 1000, 100, dtype=np.int32)
    with cairn.Context("rt", strategy=strategy, dir=pool_dir, threads=1) as ctx:
        u = ctx.dual_region("u", (16, 8))
        cells = ctx.region("cells", 100, np.int32)
        ctx.open()
        assert ctx.strategy == strategy
        assert ctx.committed_version is None
        with pytest.raises(cairn.NoVersionError):
            ctx.restore()
        u.write[:] = want_u
        cells.array[:] = want_cells
        assert ctx.commit() == 1
        assert np.array_equal(u.read, want_u)  # the written version is read next
        u.write[:] = -1.0  # an iteration that never commits
        cells.array[:] = 0
        del u, cells
    with cairn.Context("rt", strategy=strategy, dir=pool_dir, threads=1) as ctx:
        u = ctx.dual_region("u", (16, 8))
        cells = ctx.region("cells", 100, np.int32)
        ctx.open()
        assert ctx.committed_version == 1
        assert ctx.restore() == 1
        assert u.read.tobytes() == want_u.tobytes()
        assert cells.array.tobytes() == want_cells.tobytes()
        del u, cells


@pytest.mark.parametrize("strategy", ["in-place", "shadow", "nt-copy", "file"])
def test_views_are_the_memory_and_survive_restore(pool_dir, strategy):
    ctx, u, cells = make(pool_dir, strategy)
    a = cells.array
    r0, w0 = u.read, u.write
    assert not a.flags.owndata and a.flags.writeable
    assert cells.array is a and np.asarray(cells) is a
    assert a.__array_interface__["data"][0] == np.asarray(cells).__array_interface__["data"][0]
    addr = {id(x): x.__array_interface__["data"][0] for x in (a, r0, w0)}

    a[:] = 5
    r0[:] = 1.0
    w0[:] = 2.0
    assert ctx.commit() == 1
    assert u.read is w0 and u.write is r0  # roles swap, arrays stay
    u.write[:] = 3.0
    a[:] = 6
    assert ctx.commit() == 2
    assert u.read is r0
    a[:] = 99  # uncommitted
    u.write[:] = 42.0
    assert ctx.restore() == 2
    assert cells.array is a and u.read is r0 and u.write is w0
    for x in (a, r0, w0):
        assert x.__array_interface__["data"][0] == addr[id(x)]
    assert (a == 6).all() and (u.read == 3.0).all()
    del a, r0, w0
    ctx.close()


def test_dual_roles_and_carry_over(pool_dir):
    with cairn.Context("dual", dir=pool_dir) as ctx:
        u = ctx.dual_region("u", 10, np.int64)
        ctx.open()
        u.read[:] = np.arange(10)
        u.carry_over(2, 5)
        assert list(u.write[2:5]) == [2, 3, 4]
        with pytest.raises(cairn.InvalidArgumentError):
            u.carry_over(5, 11)
        assert u.shape == (10,) and u.dtype == np.int64 and u.nbytes == 80


def test_closed_and_unopened_contexts(pool_dir):
    ctx = cairn.Context("c", dir=pool_dir)
    r = ctx.region("r", 4)
    with pytest.raises(cairn.NotReadyError):
        r.array  # no memory before open
    with pytest.raises(cairn.NotReadyError):
        ctx.commit()
    ctx.open()
    view = r.array
    ctx.close()
    assert ctx.closed
    with pytest.raises(cairn.NotReadyError):
        ctx.commit()
    with pytest.raises(cairn.NotReadyError):
        r.array
    view[:] = 1.0  # the memory lives until its last array goes
    del view


def test_bad_arguments(pool_dir):
    with pytest.raises(cairn.InvalidArgumentError) as e:
        cairn.Context("x", strategy="no-such-strategy", dir=pool_dir)
    assert "no-such-strategy" in str(e.value) and e.value.code == -1 and e.value.name == "invalid_argument"
    assert isinstance(e.value, ValueError)
    ctx = cairn.Context("x", dir=pool_dir)
    with pytest.raises(cairn.InvalidArgumentError):
        ctx.region("r", (3, 0))
    ctx.region("r", 3)
    with pytest.raises(cairn.InvalidArgumentError):
        ctx.region("r", 3)  # twice
