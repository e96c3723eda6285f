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
