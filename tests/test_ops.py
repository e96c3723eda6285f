"""``ember_xla.embedding_bag`` refuses bad arguments with a ValueError naming the argument
(before: silent 32-bit truncation of int64 offsets, [0, 8] results for 2-D offsets, a bare
IndexError for a 1-D table, MLIRError for negative num_segments or empty offsets)."""

import numpy as np
import pytest

import ember_xla

T = np.arange(80, dtype=np.float32).reshape(10, 8)
IDX = np.arange(12) % 10


@pytest.mark.parametrize("kwargs, arg", [
    (dict(table=T, offsets=np.array([0, 2**62], np.int64)), "offsets"),
    (dict(table=T, offsets=np.array([[0, 6, 12]])), "offsets"),
    (dict(table=T, offsets=np.array([], np.int32)), "offsets"),
    (dict(table=T, offsets=np.array([0, 8, 4])), "offsets"),
    (dict(table=T, offsets=np.array([0.0, 12.0])), "offsets"),
    (dict(table=np.ones(10, np.float32), offsets=np.array([0, 12])), "table"),
    (dict(table=np.ones((10, 8), np.int32), offsets=np.array([0, 12])), "table"),
    (dict(table=T, segment_ids=np.zeros(12, np.int32), num_segments=-1), "num_segments"),
    (dict(table=T, segment_ids=np.zeros(12, np.int32), num_segments=2.5), "num_segments"),
    (dict(table=T, segment_ids=np.zeros(5, np.int32), num_segments=2), "segment_ids"),
    (dict(table=T, offsets=np.array([0, 12]), weights=np.ones(3, np.float32)), "weights"),
    (dict(table=T, indices=np.zeros((3, 4), np.int32), offsets=np.array([0, 12])), "indices"),
    (dict(table=T, indices=np.array([2**40]), offsets=np.array([0, 1])), "indices"),
])
def test_bad_arguments_name_the_argument(kwargs, arg):
    kwargs = dict(kwargs)
    table = kwargs.pop("table")
    indices = kwargs.pop("indices", IDX)
    with pytest.raises(ValueError, match=rf"^{arg}\b"):
        ember_xla.embedding_bag(table, indices, **kwargs)


def test_good_call_still_works():
    out = np.asarray(ember_xla.embedding_bag(T, IDX, np.array([0, 6, 12]), combiner="sum"))
    want = np.stack([T[IDX[:6]].sum(0), T[IDX[6:]].sum(0)])
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("dtype", [np.uint32, np.uint64, np.int8, np.int16, np.uint8])
@pytest.mark.parametrize("arg", ["indices", "offsets", "segment_ids"])
def test_index_dtypes_the_kernels_do_not_read(dtype, arg):
    """Before: accepted, then INVALID_ARGUMENT from inside XLA (JaxRuntimeError)."""
    kw = dict(offsets=np.array([0, 6, 12], np.int32)) if arg != "segment_ids" else dict(
        segment_ids=np.zeros(12, np.int32), num_segments=2)
    indices = IDX.astype(dtype) if arg == "indices" else IDX
    if arg != "indices":
        kw[arg] = kw[arg].astype(dtype)
    with pytest.raises(TypeError, match=rf"^{arg} must be int32 or int64"):
        ember_xla.embedding_bag(T, indices, **kw)


def test_f64_table_under_x64():
    import jax

    with jax.enable_x64(True), pytest.raises(TypeError, match=r"^table must be float32"):
        ember_xla.embedding_bag(T.astype(np.float64), IDX, np.array([0, 12]))


def test_empty_table_in_clip_mode():
    empty = np.zeros((0, 8), np.float32)
    with pytest.raises(ValueError, match=r"^table has no rows"):
        ember_xla.embedding_bag(empty, IDX, np.array([0, 12]))
    out = np.asarray(ember_xla.embedding_bag(empty, IDX, np.array([0, 12]), mode="fill"))
    assert out.shape == (1, 8) and np.isnan(out).all()


@pytest.mark.parametrize("init, exc", [(10**400, ValueError), ("0", TypeError),
                                       (None, None), (2, None), (np.float32(-1.5), None)])
def test_init(init, exc):
    call = lambda: ember_xla.embedding_bag(T, IDX, np.array([0, 12, 12]), init=init)  # noqa
    if exc is None:
        out = np.asarray(call())
        assert out[1].tolist() == [float(init or 0)] * 8  # the empty bag
    else:
        with pytest.raises(exc, match=r"^init must"):
            call()
