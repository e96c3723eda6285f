"""What TensorFlow cannot give XLA's HLO for is one line naming the cause and what to export
instead: sparse inputs (ops XLA has no kernel for, named), a hash-table lookup layer."""

from __future__ import annotations

import numpy as np
import pytest

from ember_xla.hlo.errors import HloImportError
from ember_xla.hlo_import.tf_source import from_tf_function


def test_embedding_lookup_sparse_names_the_op_and_the_dense_form():
    import tensorflow as tf

    table = tf.Variable(np.ones((50, 4), np.float32))

    @tf.function(jit_compile=True)
    def f(indices, values):
        sp = tf.sparse.SparseTensor(indices, values, dense_shape=[3, 5])
        return tf.nn.embedding_lookup_sparse(table, sp, None, combiner="mean")

    with pytest.raises(HloImportError) as e:
        from_tf_function(f, np.array([[0, 0], [1, 2]], np.int64), np.array([3, 7], np.int64))
    msg = str(e.value)
    assert "XLA has no kernel for SparseSegment" in msg and "dense [B, L] ids" in msg
    assert len(msg.splitlines()) == 1


def test_hash_table_lookup_layer_says_to_keep_it_outside():
    import keras
    import tensorflow as tf

    lookup = keras.layers.IntegerLookup(vocabulary=[3, 5, 9])

    @tf.function(jit_compile=True)
    def f(x):
        return lookup(x)

    with pytest.raises(HloImportError) as e:
        from_tf_function(f, np.array([3, 9, 4], np.int64))
    msg = str(e.value)
    assert "hash table or string op" in msg and "outside the exported signature" in msg


def test_sorted_segment_sum_points_to_the_unsorted_form():
    """tf.math.segment_sum (also what tf.nn.embedding_lookup_sparse with weights runs): its
    result size is the last segment id + 1, known only at run time."""
    import tensorflow as tf

    table = tf.Variable(np.ones((50, 4), np.float32))

    @tf.function(jit_compile=True)
    def f(ids, segments):
        return tf.math.segment_sum(tf.gather(table, ids), segments)

    with pytest.raises(HloImportError) as e:
        from_tf_function(f, np.array([3, 7, 9], np.int32), np.array([0, 0, 1], np.int32))
    msg = str(e.value)
    assert "XLA has no kernel for SegmentSum" in msg and "unsorted_segment_" in msg
    assert len(msg.splitlines()) == 1
