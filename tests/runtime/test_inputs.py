"""Random valid inputs: index parameters feeding gathers (also through JAX's helper calls,
reshapes and converts) and scatters get in-range values; other parameters random data."""

import numpy as np

from ember_xla.hlo_import.jax_source import from_jax
from ember_xla.runtime.inputs import random_inputs


def test_index_parameters_stay_in_bounds():
    import jax
    import jax.numpy as jnp

    def f(t, i, s, x, j):
        a = jax.ops.segment_sum(jnp.take(t, i, axis=0), s, num_segments=7)
        return a, x * 2, t[j.astype(jnp.int32)]

    m = from_jax(f, np.ones((13, 4), np.float32), np.zeros(50, np.int32),
                 np.zeros(50, np.int32), np.ones(3, np.float32), np.zeros((2, 5), np.int32))
    for seed in range(3):
        t, i, s, x, j = random_inputs(m.module, seed)
        assert t.dtype == np.float32 and t.shape == (13, 4)
        assert i.min() >= 0 and i.max() < 13 and len(np.unique(i)) > 5
        assert s.min() >= 0 and s.max() < 7
        assert j.min() >= 0 and j.max() < 13
        assert x.dtype == np.float32
    a, b = random_inputs(m.module, 0), random_inputs(m.module, 0)
    assert all(np.array_equal(p, q) for p, q in zip(a, b, strict=True))  # deterministic


def test_ids_carried_through_a_loop_state_are_ids():
    """lax.map / scan carry their operands in a while loop's state: ids the body reads from
    there get in-range values and edge cases; a counter-like integer carried beside them
    stays random data."""
    import jax

    from ember_xla.runtime.inputs import edge_id_inputs

    def f(ts, ids, n):
        return jax.lax.map(lambda a: a[0][a[1]].sum(1), (ts, ids)), n + 1

    m = from_jax(f, np.ones((3, 11, 4), np.float32), np.zeros((3, 6, 2), np.int32),
                 np.zeros(5, np.int32))
    base = random_inputs(m.module, 0)
    ids = base[1]
    assert ids.min() >= 0 and ids.max() < 11 and len(np.unique(ids)) > 5
    _, mixed, n = edge_id_inputs(m.module, base, 0)["mixed"]
    assert (mixed < 0).any() and (mixed >= 11).any()
    assert n is base[2]                   # not mistaken for ids


def test_ids_in_a_tf_map_fn_tensor_list_are_ids():
    """TF's ``map_fn`` carries its elements as TensorLists, tuples within the loop state:
    the ids read from there get in-range values and edge cases too."""
    import tensorflow as tf

    from ember_xla.hlo_import.tf_source import from_tf_function
    from ember_xla.runtime.inputs import edge_id_inputs

    def f(ts, ids):
        return tf.map_fn(lambda a: tf.reduce_sum(tf.gather(a[0], a[1]), 1), (ts, ids),
                         fn_output_signature=tf.float32)

    m = from_tf_function(f, np.ones((3, 11, 4), np.float32), np.zeros((3, 6, 2), np.int32))
    base = random_inputs(m.module, 0)
    assert base[1].min() >= 0 and base[1].max() < 11
    mixed = edge_id_inputs(m.module, base, 0)["mixed"][1]
    assert (mixed < 0).any() and (mixed >= 11).any()


def test_bound_parameters_take_given_values():
    m = from_jax(lambda x, y: x + y, np.ones(3, np.float32), np.ones(3, np.float32))
    v = np.array([1, 2, 3], np.float32)
    _, y = random_inputs(m.module, 0, bound={1: v})
    assert y is v or np.array_equal(y, v)


def test_float_ids_converted_to_integers_are_whole_numbers_with_edge_cases():
    """A model that casts float ids to integers before its lookup (a Keras ``Sequential``
    with a float ``Input``): the random ids are whole numbers in range (not normal draws,
    which would all cast to -1, 0 or 1), and verify gets edge-case ids for them too."""
    import jax.numpy as jnp

    from ember_xla.runtime.inputs import ID_CASES, edge_id_inputs

    m = from_jax(lambda t, x: t[x.astype(jnp.int32)].sum(1), np.ones((13, 4), np.float32),
                 np.zeros((6, 5), np.float32))
    t, x = random_inputs(m.module, 0)
    assert x.dtype == np.float32 and np.array_equal(x, np.round(x))
    assert x.min() >= 0 and x.max() < 13 and len(np.unique(x)) > 5
    cases = edge_id_inputs(m.module, [t, x], 0)
    assert tuple(cases) == ID_CASES
    mixed = cases["mixed"][1]
    assert mixed.dtype == np.float32 and (mixed < 0).any() and (mixed >= 13).any()


def _edge_model():
    import jax
    import jax.numpy as jnp

    def f(t, i, s, x):
        return jax.ops.segment_sum(jnp.take(t, i, axis=0), s, num_segments=7), x * 2

    return from_jax(f, np.ones((13, 4), np.float32), np.zeros(50, np.int32),
                    np.zeros(50, np.int32), np.ones(3, np.float32))


def test_edge_id_inputs_draw_negative_out_of_range_and_duplicate_ids():
    from ember_xla.runtime.inputs import ID_CASES, edge_id_inputs

    m = _edge_model()
    base = random_inputs(m.module, 0)
    cases = edge_id_inputs(m.module, base, 0)
    assert tuple(cases) == ID_CASES
    for name, (t, i, s, x) in cases.items():
        assert t is base[0] and x is base[3], name  # data unchanged, only ids redrawn
        assert i.dtype == np.int32 and s.dtype == np.int32
    i = cases["mixed"][1]
    assert (i < 0).any() and (i >= 13).any() and ((i >= 0) & (i < 13)).any()
    assert len(np.unique(i)) < len(i)
    assert len(np.unique(cases["duplicates"][1])) == 1
    oor = cases["out_of_range"][1]
    assert ((oor < 0) | (oor >= 13)).all()
    s = cases["mixed"][2]
    assert (s < 0).any() or (s >= 7).any()  # dropped segments too


def test_edge_ids_keep_the_sorted_promise():
    import jax
    import jax.numpy as jnp

    from ember_xla.runtime.inputs import edge_id_inputs

    def f(t, i, s):
        rows = jnp.take(t, i, axis=0)
        return jax.ops.segment_sum(rows, s, num_segments=7, indices_are_sorted=True)

    m = from_jax(f, np.ones((13, 4), np.float32), np.zeros(50, np.int32),
                 np.zeros(50, np.int32))
    cases = edge_id_inputs(m.module, random_inputs(m.module, 0), 0)
    for name in ("mixed", "duplicates"):  # "out_of_range" keeps the segment ids as drawn
        s = cases[name][2]
        assert (np.diff(s) >= 0).all() and (s < 0).any() == (name == "mixed"), name


def test_verify_catches_an_index_mode_bug_only_with_edge_ids(tmp_path):
    """A rewrite that clamps where the original gives fill values (index_mode clip instead
    of fill) agrees on in-range ids; the edge-id cases expose it."""
    from pathlib import Path

    from ember_xla.hlo.printer import print_module
    from ember_xla.hlo_import.load import load_model
    from ember_xla.rewrites.pipeline import rewrite_module
    from ember_xla.runtime.compare import verify_rewrite
    from ember_xla.runtime.inputs import edge_id_inputs

    src = Path(__file__).parents[1] / "rewrites" / "fixtures" / "jax_take_fill_segment_sum.hlo"
    orig = load_model(str(src)).module
    text = print_module(rewrite_module(orig, cost_model=False).module)
    assert 'index_mode = "fill"' in text
    bad = tmp_path / "bad.hlo"
    bad.write_text(text.replace('index_mode = "fill"', 'index_mode = "clip"'))
    buggy = load_model(str(bad)).module
    inputs = random_inputs(orig, 0)
    assert verify_rewrite(orig, buggy, inputs)["bitwise_equal"]
    v = verify_rewrite(orig, buggy, inputs, edge_id_inputs(orig, inputs, 0))
    assert not v["bitwise_equal"] and v["cases"]["in_range"]["bitwise_equal"]
    assert not v["cases"]["out_of_range"]["bitwise_equal"]
    good = load_model(str(src)).module
    ok = verify_rewrite(orig, rewrite_module(good, cost_model=False).module, inputs,
                        edge_id_inputs(orig, inputs, 0))
    assert ok["bitwise_equal"] and set(ok["cases"]) == {"in_range", "mixed", "duplicates",
                                                        "out_of_range"}
