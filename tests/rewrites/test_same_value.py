"""``same_value`` / ``same_elements`` (rewrites/same_value.py) on index arithmetic as JAX
exports it: copies of a lookup's ids are equal through reshapes, round-trip integer converts
and rewritten identical arithmetic; different parameters, lossy converts and different
arithmetic are not."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from ember_xla.hlo_import.jax_source import from_jax
from ember_xla.rewrites.canonicalize import canonicalize
from ember_xla.rewrites.same_value import same_elements, same_value

IDS = np.arange(12, dtype=np.int32).reshape(3, 4) - 5


def outputs(fn, *args):
    """The entry root's operands (the function's outputs) of ``fn`` exported by jax.jit, its
    calls (``jnp.where``'s ``_where``) inlined as the rewrite does first."""
    m = from_jax(fn, *args).module
    canonicalize(m, "inline-calls")
    return m.entry.root.operands


def wrap(i):
    return jnp.where(i < 0, i + 10, i)


@pytest.mark.parametrize(
    "fn",
    [
        lambda i: (wrap(i), wrap(i)),  # written twice
        lambda i: (wrap(i)[..., None], wrap(i).reshape(-1)),  # reshaped apart
        lambda i: (wrap(i), wrap(i.astype(jnp.uint32).astype(jnp.int32))),  # there and back
        lambda i: (wrap(i.reshape(-1)), wrap(i)),  # wrapped after a reshape
    ],
)
def test_copies_are_the_same_elements(fn):
    a, b = outputs(fn, IDS)
    assert a is not b and same_elements(a, b)


@pytest.mark.parametrize(
    "fn",
    [
        lambda i: (wrap(i), jnp.clip(i, 0, 9)),  # other arithmetic
        lambda i: (i, i.astype(jnp.int8).astype(jnp.int32)),  # a lossy convert
        lambda i: (i, i.T),  # another order
        lambda i: (i, i + 1),
    ],
)
def test_different_values_are_not(fn):
    a, b = outputs(fn, IDS)
    assert not same_elements(a, b)


def test_two_parameters_are_never_equal():
    a, b = outputs(lambda i, j: (wrap(i), wrap(j)), IDS, IDS.copy())
    assert not same_elements(a, b) and not same_value(a, b)


def test_same_value_needs_the_same_shape():
    a, b = outputs(lambda i: (wrap(i), wrap(i).reshape(-1)), IDS)
    assert not same_value(a, b) and same_elements(a, b)


BITCASTS = """
HloModule m
ENTRY e {
  p = s32[3,4]{1,0} parameter(0)
  t = s32[4,3]{0,1} bitcast(p)
  f = s32[12]{0} bitcast(p)
  r = s32[4,3]{1,0} reshape(p)
  ROOT out = (s32[4,3]{0,1}, s32[12]{0}, s32[4,3]{1,0}) tuple(t, f, r)
}
"""


def test_a_bitcast_keeps_the_order_only_between_row_major_layouts():
    from ember_xla.hlo.parser import parse_module

    transposed, flat, reshaped = parse_module(BITCASTS).entry.root.operands
    assert same_elements(flat, reshaped)  # {1,0} -> {0}: the row-major order kept
    assert not same_elements(transposed, reshaped)  # {1,0} -> {0,1}: a transpose


def test_reduces_with_equal_combining_computations_are_the_same_value():
    """JAX gives each reduce its own ``region_N``: equal op for op, as XLA's CSE compares them."""
    t = np.ones((5, 3), np.float32)
    a, b = outputs(lambda t: (t.sum(0), t.sum(0)), t)
    assert a.owner.callees[0] is not b.owner.callees[0] and same_value(a, b)
    a, b = outputs(lambda t: (t.sum(0), t.max(0)), t)
    assert not same_value(a, b)


SWAPPED = """
HloModule m
f {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT d = f32[] subtract(x, y)
}
g {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT d = f32[] subtract(y, x)
}
ENTRY e {
  p = f32[4]{0} parameter(0)
  z = f32[] constant(0)
  a = f32[] reduce(p, z), dimensions={0}, to_apply=f
  b = f32[] reduce(p, z), dimensions={0}, to_apply=f
  c = f32[] reduce(p, z), dimensions={0}, to_apply=g
  ROOT out = (f32[], f32[], f32[]) tuple(a, b, c)
}
"""


def test_combining_computations_differ_by_their_operands_order():
    from ember_xla.hlo.parser import parse_module

    a, b, c = parse_module(SWAPPED).entry.root.operands
    assert same_value(a, b) and not same_value(a, c)
