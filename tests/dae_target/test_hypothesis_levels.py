"""Hypothesis: random clusters x random valid pipelines. After lowering to SLC and after every
pass of the pipeline, the level's interpreter gives the same outputs as XLA:CPU on the same
random valid inputs (bit-exact; ``sqrt_n`` within 4 ulp, see ``dae_target/check.py``).

Clusters come from two pools:
- *rewritten*: every ember custom-call the rewrite makes of the idiom fixtures
  (tests/rewrites/fixtures/*.hlo, real JAX/TF exports); the reference is the call's outlined
  computation on XLA:CPU;
- *generated*: one ember custom-call of a drawn kind, combiner, index mode, negative wrapping,
  index bits, weights, table/result/id dtypes and shape (D=1, tails not a multiple of VL,
  empty bags, zero output rows ...), written as HLO text; the reference is the call itself
  (the native kernel) on XLA:CPU.
Inputs: ``check.random_inputs`` (negative, out-of-range and duplicate ids, dropped segment ids,
empty bags) or one of its edge cases.

Cost: ~200 cases in the default run (about a minute on the 2-core CI machine); 3000 in the
``slow`` run (``pytest -m slow tests/dae_target/test_hypothesis_levels.py``)."""

from __future__ import annotations

import functools
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from ember_xla.call_specs import LoweringRefused, cluster_spec, ember_calls
from ember_xla.custom_calls import MINMAX_ORDERS, call_attributes, mlir_f64
from ember_xla.dae_target.check import EDGE_CASES, compare, outlined_module, random_inputs
from ember_xla.dae_target.interp.run import run
from ember_xla.dae_target.lower.to_slc import lower_call
from ember_xla.ir.passes import parse_pipeline, pipeline_string
from ember_xla.ir.verify import verify_generic_module

FIXTURES = Path(__file__).parents[1] / "rewrites" / "fixtures"
SETTINGS = dict(deadline=None, derandomize=True, database=None,
                suppress_health_check=list(HealthCheck))


# -- the pools ---------------------------------------------------------------------------------
def _idiom_models():
    """tests/rewrites/idiom_models.py (the fixtures' idioms and their tolerances)."""
    from helper_modules import load_helper

    return load_helper(FIXTURES.parent / "idiom_models.py")


@functools.cache
def rewritten_pool() -> list[tuple[object, object, float]]:
    """(rewritten HLO module, ember call, tolerance) for every call the rewrite makes of the
    fixtures. The tolerance is the idiom's own (docs: tests/rewrites/idiom_models.py): 0 means
    bit-exact; XLA:CPU's reduce order is implementation-defined, so reduce-rooted idioms get
    ``_TOL_REDUCE`` against their outlined computation."""
    from ember_xla.hlo.errors import HloImportError
    from ember_xla.hlo_import.load import load_model
    from ember_xla.rewrites.pipeline import rewrite_module

    idioms = _idiom_models()
    out = []
    for f in sorted(FIXTURES.glob("*.hlo")):
        try:
            module = load_model(str(f)).module
        except HloImportError:  # two TF fixtures print elided constants; the proto tests cover them
            continue
        tol = idioms.idiom(f.stem).tolerance
        # one call per reduction: multi-output calls have no DAE lowering (refused)
        rewritten = rewrite_module(module, multi_output=False).module
        # a max/min padded bag in XLA:CPU's NaN semantics (the CPU kernel's sum_order) is
        # refused by the DAE lowering by design (call_specs.py): not a candidate here
        out += [(rewritten, c, tol) for c in ember_calls(rewritten)
                if call_attributes(c).get("sum_order") not in MINMAX_ORDERS]
    assert len(out) > 40, len(out)
    return out


_HLO_T = {"f32": "f32", "bf16": "bf16", "f16": "f16", "s32": "s32", "s64": "s64"}


def _shape_text(dtype: str, shape: tuple[int, ...]) -> str:
    layout = ",".join(str(i) for i in reversed(range(len(shape))))
    return f"{dtype}[{','.join(map(str, shape))}]{{{layout}}}"


def generated_call(seed: int | list[int]) -> str:
    """HLO text of a module whose entry is one ember custom-call, every choice uniform from
    ``seed`` (hypothesis' own draws favour the first options and missed whole combiners)."""
    rng = np.random.default_rng(seed)

    def pick(options):
        return options[int(rng.integers(len(options)))]

    kind = pick(["segment_reduce", "padded_bag", "offsets_bag", "grouped_segment_reduce"])
    tdt = pick(["f32", "bf16", "f16"])
    odt = tdt if tdt == "f32" else pick([tdt, "f32"])
    idt = pick(["s32", "s64"])
    combiner = pick(["sum", "max", "min", "mean", "sqrt_n"])
    lowest = -3.4028234663852886e38
    init = {"max": pick([-math.inf, lowest]), "min": pick([math.inf, -lowest])}.get(combiner, 0.0)
    mode, wrap, bits = pick(["clip", "fill"]), pick([False, True]), pick([64, 32])
    weighted = kind != "grouped_segment_reduce" and pick([False, True])
    n_parts = int(rng.integers(1, 4)) if kind == "grouped_segment_reduce" else 1
    params, results = [], []
    for _ in range(n_parts):
        n, d, rows = int(rng.integers(1, 10)), pick([1, 2, 3, 7, 8, 9, 17]), int(rng.integers(6))
        params.append(_shape_text(tdt, (n, d)))
        if kind == "padded_bag":
            lookups: tuple[int, ...] = (rows, int(rng.integers(5)))
            params.append(_shape_text(idt, lookups))
        else:
            ln = int(rng.integers(13))
            lookups = (ln,)
            params.append(_shape_text(idt, lookups))
            params.append(_shape_text(idt, (rows + 1,) if kind == "offsets_bag" else (ln,)))
        results.append(_shape_text(odt, (rows, d)))
    if weighted:
        params.append(_shape_text(pick([tdt, odt]), lookups))
    body = [f"  p{i} = {s} parameter({i})" for i, s in enumerate(params)]
    res = results[0] if kind != "grouped_segment_reduce" else f"({', '.join(results)})"
    cfg = (f'combiner = "{combiner}", index_bits = {bits} : i64, index_mode = "{mode}", '
           f"init = {mlir_f64(init)}, weighted = {'true' if weighted else 'false'}, "
           f"wrap_negative = {'true' if wrap else 'false'}"
           + (', row_type = "", sum_order = "sequential"' if kind == "padded_bag" else ""))
    body.append(f"  ROOT call = {res} custom-call({', '.join(f'p{i}' for i in range(len(params)))}"
                f'), custom_call_target="ember.{kind}", api_version=API_VERSION_TYPED_FFI, '
                f"backend_config={{{cfg}}}")
    return "HloModule generated\n\nENTRY main {\n" + "\n".join(body) + "\n}\n"


# -- pipelines ---------------------------------------------------------------------------------
@st.composite
def pipelines(draw) -> str:
    """A random valid pipeline, passes in the order they apply (each optional, ``queue-align``
    before or after ``decouple``: it works on both levels)."""
    out = []
    if draw(st.booleans()):
        out.append("dedup")
    if draw(st.booleans()):
        out.append("hoist")
    if draw(st.integers(0, 3)):  # vectorize 3 times out of 4
        out.append(f"vectorize{{vl={draw(st.sampled_from([1, 2, 4, 8, 16]))}}}")
        if draw(st.booleans()):
            out.append("bufferize")
    align = draw(st.sampled_from(["", "before", "after"]))
    if align == "before":
        out.append("queue-align")
    if "vectorize" in ",".join(out) and draw(st.booleans()):
        out.append("simplify-mem")
    if draw(st.booleans()):
        out.append("hoist")
    if draw(st.integers(0, 3)):  # decouple 3 times out of 4
        out.append("decouple")
        if align == "after":
            out.append("queue-align")
    return ",".join(out)


# -- the property ------------------------------------------------------------------------------
def _reference(module, call):
    from ember_xla.runtime.execute import run_module

    ref = outlined_module(module, call) if call.callees else module
    return lambda xs: run_module(ref, xs)


def _compare(want: np.ndarray, got: np.ndarray, exact: bool, tol: float) -> str | None:
    if not tol:
        return compare(want, got, exact)[1]
    if want.shape != got.shape or want.dtype != got.dtype:
        return f"{got.dtype}{list(got.shape)} vs {want.dtype}{list(want.shape)}"
    w, g = want.astype(np.float64), got.astype(np.float64)
    if not np.allclose(g, w, rtol=tol, atol=tol, equal_nan=True):
        return f"beyond the idiom's tolerance {tol:g}"
    return None


def check_case(module, call, pipeline: str, seed: int, case: str | None,
               tol: float = 0.0) -> None:
    import ember_xla.dae_target.passes  # noqa: F401  (registers the passes)

    spec = cluster_spec(call)
    try:
        low = lower_call(call)
    except LoweringRefused as e:  # must be a documented refusal, never a wrong lowering
        pytest.fail(f"generated call refused: {e}")
    inputs = random_inputs(spec, np.random.default_rng(seed), case)
    want = [np.asarray(w) for w in _reference(module, call)(inputs)]
    exact = spec.combiner != "sqrt_n"
    stage = "lower-to-slc"
    event(f"kind {spec.kind}")
    event(f"combiner {spec.combiner}")
    for p in [None, *parse_pipeline(pipeline)]:
        if p is not None:
            report = p.apply(low)
            stage = pipeline_string([p])
            event(f"{p.name}: {'changed' if report else 'nothing to do'}")
        verify_generic_module(low)
        got = run(low, inputs)
        for k, (w, g) in enumerate(zip(want, got, strict=True)):
            fail = _compare(w, g, exact, tol)
            assert fail is None, f"after {stage} (pipeline {pipeline!r}), output {k}: {fail}"


def _parse_hlo(text: str):
    from ember_xla.hlo.parser import parse_module

    m = parse_module(text, "<generated>")
    return m, ember_calls(m)[0]


def _cases(n: int):
    generated = st.integers(0, 2**32 - 1).map(lambda i: ("generated", i))
    source = st.one_of(generated, st.integers(0, 10_000).map(lambda i: ("rewritten", i)))
    strategies = given(source=source, pipeline=pipelines(), seed=st.integers(0, 2**31 - 1),
                       case=st.sampled_from([None, None, None, *EDGE_CASES]))
    return lambda fn: settings(max_examples=n, **SETTINGS)(strategies(fn))


def _run(source, pipeline, seed, case):
    what, x = source
    if what == "rewritten":
        pool = rewritten_pool()
        module, call, tol = pool[(x + seed) % len(pool)]
    else:
        # mixed with the input seed: hypothesis repeats small integers a lot
        (module, call), tol = _parse_hlo(generated_call([x, seed])), 0.0
    check_case(module, call, pipeline, seed, case, tol)


@_cases(200)
def test_levels_match_xla(source, pipeline, seed, case):
    _run(source, pipeline, seed, case)


@pytest.mark.slow
@_cases(3000)
def test_levels_match_xla_many(source, pipeline, seed, case):
    _run(source, pipeline, seed, case)
