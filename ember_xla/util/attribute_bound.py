"""``attribute_bound(obj, name, value)``: a context in which ``obj.name`` is ``value``, restored
on exit (also after an exception). How a front door lends a library's own code another
function for the time it builds something (Keras' trainer its ``jit``, flax nnx its ``jax``)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def attribute_bound(obj: Any, name: str, value: Any) -> Iterator[None]:
    saved = getattr(obj, name)
    setattr(obj, name, value)
    try:
        yield
    finally:
        setattr(obj, name, saved)
