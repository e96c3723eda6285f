"""``attribute_bound``: the attribute is the lent value inside the context and its own again
after it, also when the body raises."""

from __future__ import annotations

import types

import pytest

from ember_xla.util.attribute_bound import attribute_bound


def test_bound_inside_restored_after_and_after_an_error():
    holder = types.SimpleNamespace(jit="own")
    with attribute_bound(holder, "jit", "lent"):
        assert holder.jit == "lent"
    assert holder.jit == "own"
    with pytest.raises(RuntimeError), attribute_bound(holder, "jit", "lent"):
        raise RuntimeError("boom")
    assert holder.jit == "own"
