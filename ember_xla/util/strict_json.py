"""JSON that strict readers accept (RFC 8259 has no ``Infinity`` or ``NaN``, which Python's
``json`` writes by default). The rule for every file and ``--json`` output of ember-xla: a
non-finite number is written as the string ``"inf"``, ``"-inf"`` or ``"nan"``; ``dumps`` then
refuses (``allow_nan=False``) anything that slipped through. NumPy scalars and arrays are
written as the Python numbers and lists they hold. ``number`` reads such a field back."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np

NON_FINITE = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}


def _float(x: float) -> float | str:
    if math.isfinite(x):
        return x
    return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")


def plain(obj: Any) -> Any:
    """``obj`` with non-finite floats as strings and NumPy values as Python ones."""
    if isinstance(obj, bool) or obj is None or isinstance(obj, (str, int)):
        return obj
    if isinstance(obj, float):
        return _float(obj)
    if isinstance(obj, dict):
        return {k: plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plain(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return plain(obj.tolist())
    if isinstance(obj, np.generic):
        return plain(obj.item())
    return obj


def dumps(obj: Any, **kwargs: Any) -> str:
    """``json.dumps`` under the rule above."""
    return json.dumps(plain(obj), allow_nan=False, **kwargs)


def number(v: Any) -> Any:
    """A numeric field read back: ``"inf"``/``"-inf"``/``"nan"`` as floats, else unchanged."""
    return NON_FINITE.get(v, v) if isinstance(v, str) else v
