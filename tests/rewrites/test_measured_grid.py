"""The measured-grid rule (rewrites/measured_grid.py) on hand-made points: interpolation in
the logarithms of the sizes, clamping to the grid, cells pooling several points, and the less
favourable of the two statistics."""

from __future__ import annotations

import itertools
import math

import pytest

from ember_xla.rewrites import measured_grid


def _point(b: int, d: int, xla: float, ember: float, xla_q1: float | None = None,
           ember_q1: float | None = None) -> dict:
    return {"B": b, "D": d, "xla_s": xla, "ember_s": ember,
            "xla_q1_s": xla if xla_q1 is None else xla_q1,
            "ember_q1_s": ember if ember_q1 is None else ember_q1}


# XLA 1 s at B=1, 100 s at B=100; the kernel 1x at B=1, 4x at B=100 (both D)
POINTS = [_point(b, d, float(b), float(b) / s)
          for (b, s), d in itertools.product([(1, 1.0), (100, 4.0)], (8, 64))]


def _predict(points, at, cell=("B", "D"), robust="_q1_s"):
    return measured_grid.predict(points, cell, ("B", "D"), at, robust=robust)


def test_grid_points_are_their_measurements():
    assert _predict(POINTS, {"B": 100, "D": 8}) == pytest.approx({"ember": 25.0, "xla": 100.0})
    assert _predict(POINTS, {"B": 1, "D": 64}) == pytest.approx({"ember": 1.0, "xla": 1.0})


def test_between_points_in_log_sizes():
    got = _predict(POINTS, {"B": 10, "D": 20})  # halfway in log B: XLA 10 s, speedup 2x
    assert math.isclose(got["xla"], 10.0) and math.isclose(got["ember"], 5.0)


def test_clamped_outside_the_grid():
    assert _predict(POINTS, {"B": 10_000, "D": 1000}) == _predict(POINTS, {"B": 100, "D": 64})
    assert _predict(POINTS, {"B": 0, "D": 1}) == _predict(POINTS, {"B": 1, "D": 8})


def test_the_less_favourable_statistic_decides():
    # the lower quartiles say 2x where the medians say 4x: 2x
    pts = [_point(b, d, float(b), float(b) / 4, float(b), float(b) / 2) for b in (1, 100)
           for d in (8, 64)]
    assert _predict(pts, {"B": 100, "D": 8})["ember"] == pytest.approx(50.0)
    # the minima say 4x: read with robust="_min_s" they are missing here
    with pytest.raises(KeyError):
        _predict(pts, {"B": 100, "D": 8}, robust="_min_s")


def test_a_cell_pools_its_points():
    # cells by B only: the speedup is the median over the cell's D (1x, 3x, 5x -> 3x)
    pts = [_point(100, d, 100.0, 100.0 / s) for d, s in ((8, 1.0), (16, 3.0), (64, 5.0))]
    pts += [_point(1, d, 1.0, 1.0) for d in (8, 16, 64)]
    got = _predict(pts, {"B": 100, "D": 64}, cell=("B",))
    assert math.isclose(got["ember"], 100.0 / 3.0)


def test_no_points_is_an_error():
    with pytest.raises(ValueError, match="no measured points"):
        _predict([], {"B": 1, "D": 8})
