"""Hypothesis over the hand-built embedding bag: random bag shapes (empty bags, duplicate
ids, D from 1, tails not a multiple of VL), combiners, weights, VL and random valid orders of
dedup / hoist / vectorize / bufferize / simplify-mem. After every pass the IR verifies, prints
back to itself, and gives exactly the outputs of O0 and of a numpy reference.

Cost: 40 examples in the default run (~20 s on the 2-core CI machine); 600 in the ``slow``
run."""

import numpy as np
import pytest
import slc_examples as E
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ember_xla.dae_target import passes  # noqa: F401  (registers the passes)
from ember_xla.ir.parser import parse_module
from ember_xla.ir.passes import parse_pipeline
from ember_xla.ir.printer import print_module
from ember_xla.ir.verify import verify_generic_module


@st.composite
def pipelines(draw) -> list[str]:
    out = []
    if draw(st.booleans()):
        out.append("dedup")
    if draw(st.booleans()):
        out.append("hoist")
    if draw(st.booleans()):
        out.append(f"vectorize{{vl={draw(st.integers(1, 9))}}}")
        later = draw(st.permutations(["bufferize", "simplify-mem", "hoist"]))
        out += [p for p in later if draw(st.booleans())]
    return out


@st.composite
def bags(draw):
    lengths = draw(st.lists(st.integers(0, 6), min_size=0, max_size=5))
    return dict(
        combiner=draw(st.sampled_from(["sum", "max"])),
        weighted=draw(st.booleans()),
        dim=draw(st.integers(1, 11)),
        rows=draw(st.integers(1, 9)),
        lengths=lengths,
        dup=draw(st.booleans()),
        seed=draw(st.integers(0, 2**16)),
    )


def _check(bag, pipeline):
    rng = np.random.default_rng(bag["seed"])
    x = E.bag_inputs(rng, bag["lengths"], bag["rows"], bag["dim"], weighted=bag["weighted"],
                     dup=bag["dup"])
    m = E.embedding_bag(bag["combiner"], weighted=bag["weighted"], clamp=True)
    want, _ = E.run_bag(m, x)
    np.testing.assert_array_equal(want, E.bag_reference(x, bag["combiner"]))
    for p in parse_pipeline(",".join(pipeline)):
        p.apply(m)
        verify_generic_module(m)
        text = print_module(m)
        assert print_module(parse_module(text)) == text
        got, _ = E.run_bag(m, x)
        np.testing.assert_array_equal(got, want, err_msg=f"after {p.name} in {pipeline}")


_SETTINGS = dict(deadline=None, derandomize=True, database=None,
                 suppress_health_check=list(HealthCheck))


@settings(max_examples=40, **_SETTINGS)
@given(bags(), pipelines())
def test_random_pipelines(bag, pipeline):
    _check(bag, pipeline)


@pytest.mark.slow
@settings(max_examples=600, **_SETTINGS)
@given(bags(), pipelines())
def test_random_pipelines_slow(bag, pipeline):
    _check(bag, pipeline)
