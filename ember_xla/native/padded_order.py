"""The order in which XLA:CPU adds the rows of a padded bag (a ``reduce`` over the bag axis of
[B, P, D], or a dot with weights over that axis), as the ``sum_order`` attribute of
``ember.padded_bag`` (native/blocked_sum.h, native/window_sum.h): measured against XLA:CPU
(jax/jaxlib 0.10.2) and matched to its published thresholds (docs/RELIABILITY.md, "The order
of a padded bag's sum"). ``sum_order`` is the one rule of the padded-bag and dot-bag rewrites
and of ``ember_xla.embedding_bag``. The rewrite keeps a bag whose order is not reproduced in
XLA; ``ember_xla.embedding_bag`` adds such a bag row after row."""

from __future__ import annotations

import dataclasses

from ember_xla.util.xla_flags import xla_flag


class OrderNotReproduced(Exception):
    """XLA:CPU adds this bag's rows in an order the kernel does not reproduce (the reason)."""


#: XLA:CPU gives a reduce to YNNPACK when its operand or result has this many elements
#: (xla/backends/cpu/ynn_support.cc: IsInstructionPreferredByYnn).
YNN_MIN_ELEMENTS = 4096
#: The XLA flag that chooses XLA:CPU's YNNPACK fusions ("" turns them off).
YNN_FLAG = "xla_cpu_experimental_ynn_fusion_type"


def ynn_reduces(elements: int) -> bool:
    """Does XLA:CPU give an f32 reduce of ``elements`` operand elements to YNNPACK? From
    YNN_MIN_ELEMENTS on with its default fusions; never with them off (``XLA_FLAGS=
    --xla_cpu_experimental_ynn_fusion_type=``: measured, its own loop's orders then hold at
    every size: row after row up to 24 rows, vector8, tree32; fused multiply-adds up to 15
    weighted rows). Another setting is not modelled: OrderNotReproduced from that size on."""
    if elements < YNN_MIN_ELEMENTS:
        return False
    setting = xla_flag(YNN_FLAG)
    if setting is None:
        return True
    if setting == "":
        return False
    raise OrderNotReproduced(
        f"XLA_FLAGS sets --{YNN_FLAG}={setting}: which reduces XLA:CPU gives to YNNPACK then "
        "(and in which order they are summed) is not modelled, so the cluster stays in XLA")


def check_lookup_layout(elements: int, change: str) -> None:
    """Raises OrderNotReproduced (naming ``change``) when changing the layout of looked-up rows
    (``elements`` values) that XLA:CPU sums may change the order of its adds: from
    YNN_MIN_ELEMENTS on, where YNNPACK takes the sum. Measured with jax/jaxlib 0.10.2:
    - YNNPACK splits a sum over the leading lookup axis across its threads when other lookup
      dims follow it ([P, B, D] summed over axis 0: time-major ids), so its order depends on
      the machine's thread count: [10,256,64], [30,2048,64], [10,64,4,64], [16,64,64] and
      [100,64,64] sums give other bits on one thread than on two, while the same lookups
      summed over any other axis ([B,P,D] over 1, [B,F,P,D] over 2, [B,P,F,D] over 1) and one
      bag of 1-D ids ([P,D] over 0) give the same bits on both. Moving such a bag onto axis 1
      (the form the kernels reproduce) changes its bits.
    - It sums rows in the gather's own lookup order, whatever transposes follow:
      ``t[ids].transpose(1, 0, 2).sum(0)`` is summed as ``t[ids].sum(1)``,
      ``t[ids.T].transpose(1, 0, 2).sum(1)`` as ``t[ids.T].sum(0)``. Moving a transpose that
      changes the leading lookup axis onto the ids changes its bits.
    Below that size XLA:CPU's own loop adds the rows in the same order in every layout. The
    caller says when its change is one of these."""
    if not ynn_reduces(elements):
        return
    raise OrderNotReproduced(
        f"{change} ({elements} values): from that size on XLA:CPU gives the sum to YNNPACK, "
        "which sums looked-up rows in the gather's own lookup order and splits a reduce over "
        "the leading axis across its threads (the order of its adds then depends on the "
        "machine's thread count); the cluster stays in XLA in its own layout")


#: YNNPACK reduces a bag's rows in tiles of floor(YNN_TILE_VALUES / D) rows (measured): a max
#: or min bag tile by tile, each in groups of 4 from its first row (a tile's short last group
#: repeats its first row; native/padded_minmax.h); sums across tiles are not reproduced.
YNN_TILE_VALUES = 32768
#: Below the YNNPACK size XLA:CPU's own loop adds a bag's rows one after the other up to this
#: many rows; past it LLVM vectorizes the loop, when depends on the loop's code: the rows' type
#: (bf16 / f16 rows are converted to f32 in the loop), the ids' type (jnp.take converts s64 ids
#: to s32 after its bounds test; the loop computes on s64) and every select in the loop
#: (``BagSum.loop_selects``): jnp.take's fill (NaN rows for ids out of the table), a padding
#: mask (``jnp.where(mask, rows, 0)``), both. Measured on an AMD EPYC Zen 4 with rows near the
#: maximum, B 1..16, D 1..16, both precision settings, the lowest kept: f32 rows, s32 ids:
#: clamp 24 (then "vector8" from 25: native/window_sum.h), fill 21, mask 19 (21 at B = 1),
#: both 17; s64 ids: 21, 18, 17, 15. bf16 rows (summed in f32) with a select: 15 (they
#: vectorize sooner without excess precision); their clamp measured 21 / 18, and the limits
#: 18 / 15 measured before on other CPUs are kept. f16 sums into f16 rarely tell the orders
#: apart: with a select, bf16's limits are taken; the clamp's were measured with f32 results.
SEQUENTIAL_MAX_WIDTH = {
    ("f32", "s32", "clamp"): 24, ("f32", "s32", "fill"): 21, ("f32", "s32", "mask"): 19,
    ("f32", "s32", "mask_fill"): 17,
    ("f32", "s64", "clamp"): 21, ("f32", "s64", "fill"): 18, ("f32", "s64", "mask"): 17,
    ("f32", "s64", "mask_fill"): 15,
    **{("bf16", i, loop): 15 for i in ("s32", "s64") for loop in ("fill", "mask", "mask_fill")},
    ("bf16", "s32", "clamp"): 18, ("bf16", "s64", "clamp"): 15,
    **{("f16", i, loop): 15 for i in ("s32", "s64") for loop in ("fill", "mask", "mask_fill")},
    ("f16", "s32", "clamp"): 22, ("f16", "s64", "clamp"): 18,
}
#: YNNPACK reduces a bag of one-value rows along its contiguous rows: 16 interleaved partial
#: sums added as a tree (measured at 16-40 rows; not at 100), an order the kernels do not
#: reproduce beyond this many rows.
UNIT_ROW_YNN_MAX_WIDTH = 2
#: From this many rows (f32 rows, s32 indices, D >= 2) the loop is vectorized as "vector8".
VECTOR_MIN_WIDTH = 25
#: XLA:CPU's tree-reduction rewriter splits a reduced dimension longer than this into windows
#: of this many rows ("tree32", native/window_sum.h).
TREE_WINDOW = 32
#: Up to this many windows their sums are added in order (measured); past it the reduce of the
#: window sums is itself a loop of more than 24 rows, whose order is not measured.
TREE_MAX_WINDOWS = 24
#: Weighted bags summed in f32 below the YNNPACK size: XLA:CPU's loop adds the rows one after
#: the other (f32 tables: with fused multiply-adds) up to 15 rows; at 16 rows the order depends
#: on the loop's code (bf16 rows, s64 ids, D): rows near the maximum overflow differently in 20
#: of 20 random bags for some of them; from 17 rows on always (measured; RELIABILITY.md).
FMA_MAX_WIDTH = 16
#: From this bag width on, YNNPACK's order is not the blocked one (measured; RELIABILITY.md).
BLOCKED_MAX_WIDTH = 512
#: A weighted bag's multiply and reduce form one YNNPACK subgraph, which YNNPACK rewrites from a
#: sum of products into a dot (ynnpack/subgraph/fusion.cc; its test reduce_dot.cc). Measured on
#: XLA:CPU (jax/jaxlib 0.10.2, AMD EPYC with AVX-512, and a Zen 3 with AVX2 only): that dot
#: adds the products one after the other, each with a fused multiply-add, when D >= 17, B >= 2
#: and P * D <= 32768; other
#: shapes use other orders (D <= 16: partly four interleaved accumulators; P * D > 32768: the
#: P rows split into chunks; B = 1: a vector dot), which are not reproduced.
DOT_MIN_DIM = 17
DOT_MAX_PRODUCTS = 32768
#: A bag written as a dot (einsum over the bag axis) of rows this wide: XLA:CPU's order is not
#: reproduced (measured: 11 of 14 shapes differ; D = 1 becomes a reduce, D >= 3 is sequential).
DOT_UNREPRODUCED_DIM = 2


def _check_ynn_tiles(p: int, d: int, shape: str) -> None:
    """YNNPACK's reduce cuts a bag of more than floor(YNN_TILE_VALUES / D) rows into tiles of
    that many rows; the blocked sum across tiles is not reproduced (measured: 1811 of 3000
    outputs of [2,40,1500] sums differ from the blocked order)."""
    if p > YNN_TILE_VALUES // d:
        raise OrderNotReproduced(
            f"bag {shape}: YNNPACK sums a bag of more than floor({YNN_TILE_VALUES} / D) = "
            f"{YNN_TILE_VALUES // d} rows in tiles of that many rows, an order the blocked sum "
            "does not reproduce, so the cluster stays in XLA")


def _ynn_weighted(b: int, p: int, d: int, shape: str, combiner: str, init: float,
                  f16_products: bool) -> str:
    """The order of a weighted bag at YNNPACK sizes (see DOT_MIN_DIM), or OrderNotReproduced."""
    kept = "so the cluster stays in XLA"
    if combiner != "sum" or init != 0.0:
        raise OrderNotReproduced(f"weighted {combiner} bag {shape} starting at {init}: "
                                 "YNNPACK's order is reproduced for weighted sums from 0 only")
    if f16_products:
        # XLA:CPU rounds the f16 products in a loop fusion (YNNPACK has no f16 multiply) and
        # gives YNNPACK the reduce of the converted products: the unweighted blocked order
        if p >= BLOCKED_MAX_WIDTH:
            raise OrderNotReproduced(f"weighted bag {shape}: XLA:CPU's YNNPACK order for bags "
                                     f"of {BLOCKED_MAX_WIDTH} or more rows is not reproduced, "
                                     f"{kept}")
        _check_ynn_tiles(p, d, shape)
        return "blocked" if p > 4 else "sequential"
    if d < DOT_MIN_DIM or b < 2 or p * d > DOT_MAX_PRODUCTS:
        raise OrderNotReproduced(
            f"weighted bag {shape}: XLA:CPU hands it to YNNPACK as a dot, whose order is "
            f"reproduced for D >= {DOT_MIN_DIM}, B >= 2 and P * D <= {DOT_MAX_PRODUCTS} only, "
            f"{kept}")
    return "sequential_fma"


#: Below the YNNPACK size XLA:CPU's own loop takes a max/min bag's rows in order (the result:
#: the first NaN, or the bag's max / min) except from 20 (s64 ids; s32: 23, jnp.take clip
#: mode: 30) to 32 rows, where LLVM vectorizes it, and past 32 rows it reduces tree windows of
#: 32 rows, in order, then the windows in order (measured; docs/RELIABILITY.md). Up to 19
#: windows are kept (the vectorization's lower limit).
MINMAX_VECTOR_WIDTHS = (20, 32)
MINMAX_MAX_WIDTH = 19 * TREE_WINDOW
#: The identity a max / min bag's reduce starts from (jnp, Keras and TF all start there).
MINMAX_INIT = {"max": float("-inf"), "min": float("inf")}


def minmax_order(bag: BagSum) -> str:
    """How XLA:CPU computes a max / min padded bag (a ``reduce`` over the bag axis), as the
    kernel's ``sum_order`` (native/padded_minmax.h): "reduce_loop" (its own loop, below
    YNN_MIN_ELEMENTS) or "ynn_groups4" (YNNPACK's groups of 4 rows, from YNN_MIN_ELEMENTS on);
    the two differ in NaN handling (the loop propagates NaN, YNNPACK's vmaxps drops it) and in
    signed zeros. Measured bit for bit against jax/jaxlib 0.10.2 (docs/RELIABILITY.md, "Max and
    min bags"); raises OrderNotReproduced for the bags that are not reproduced."""
    shape = f"[{bag.b},{bag.p},{bag.d}] {bag.reduce_type}"
    what = f"{bag.combiner} bag {shape}"
    kept = "so the cluster stays in XLA"
    table_type = bag.table_type or bag.reduce_type
    if bag.reduce_type != "f32" or table_type != "f32":
        raise OrderNotReproduced(
            f"{what} of {table_type} rows: XLA:CPU's max/min of bf16/f16 (YNNPACK compares "
            f"them as sign-magnitude integers) is reproduced for f32 rows only, {kept}")
    if bag.weighted:
        raise OrderNotReproduced(f"weighted {what}: only unweighted max/min bags are "
                                 f"reproduced, {kept}")
    if bag.init != MINMAX_INIT[bag.combiner]:
        raise OrderNotReproduced(f"{what} starts at {bag.init}, not "
                                 f"{MINMAX_INIT[bag.combiner]}: reproduced from the identity "
                                 f"only, {kept}")
    if bag.p == 1:
        raise OrderNotReproduced(
            f"{what} of one row: XLA:CPU folds the reduce over it away (the bag is its row, "
            "denormals kept), which the kernel, comparing the row with the init under "
            f"denormals-are-zero, does not reproduce, {kept}")
    if not ynn_reduces(bag.b * bag.p * bag.d):
        if bag.index_mode == "fill" and bag.p >= MINMAX_VECTOR_WIDTHS[0]:
            raise OrderNotReproduced(
                f"{what}, jnp.take's fill mode: XLA:CPU's own loop, with the fill's NaN rows "
                f"fused in, is reproduced up to {MINMAX_VECTOR_WIDTHS[0] - 1} rows (its tree "
                "windows give NaN results whose sign and payload are not reproduced), "
                f"{kept}")
        if MINMAX_VECTOR_WIDTHS[0] <= bag.p <= MINMAX_VECTOR_WIDTHS[1] or \
                bag.p > MINMAX_MAX_WIDTH:
            raise OrderNotReproduced(
                f"{what}: XLA:CPU's own loop vectorizes bags of {MINMAX_VECTOR_WIDTHS[0]}-"
                f"{MINMAX_VECTOR_WIDTHS[1]} rows (and the reduce of more than "
                f"{MINMAX_MAX_WIDTH // TREE_WINDOW} tree windows), in an order that decides "
                f"which NaN's sign and payload a bag of several NaNs gives, not reproduced, "
                f"{kept}")
        return "reduce_loop"
    if bag.d == 1:
        raise OrderNotReproduced(
            f"{what}: YNNPACK reduces rows of one value along the contiguous bag axis, in "
            f"16-lane tiles folded horizontally, which is not reproduced, {kept}")
    if bag.d > YNN_TILE_VALUES:
        raise OrderNotReproduced(
            f"{what}: YNNPACK's tiles of the bag axis (floor({YNN_TILE_VALUES} / D) rows) are "
            f"measured for D <= {YNN_TILE_VALUES} only, {kept}")
    return "ynn_groups4"


@dataclasses.dataclass(frozen=True)
class BagSum:
    """A padded bag's lookup and sum: everything that decides the order in which XLA:CPU adds
    its P rows. ``form`` "reduce": a ``reduce`` over the bag axis (``jnp.sum(t[ids], 1)``,
    weighted: of ``rows * w``); "dot": a ``dot_general`` / einsum of f32 rows with weights
    contracted over the bag axis."""

    b: int
    p: int
    d: int
    reduce_type: str                 # the sum's element type: f32, bf16, f16
    combiner: str = "sum"
    init: float = 0.0
    weighted: bool = False
    table_type: str | None = None    # the rows' type before a convert to reduce_type
    index_type: str = "s32"          # the ids' type (anything but s32 is taken as s64)
    index_mode: str = "clip"         # clip | fill
    wrap_negative: bool = False      # negative ids wrapped before the clamp (t[ids])
    form: str = "reduce"             # reduce | dot
    #: the weights are one scalar broadcast to every lookup (rows scaled by one number, e.g.
    #: ``emb(ids) * sqrt(D)``): "constant" (a literal) or "value" (computed); None: per lookup
    scale: str | None = None
    #: the weights' broadcast to the rows' shape is computed for other code too (XLA's CSE
    #: merges it with the backward's): YNNPACK gets full-size weights, as for a scaled bag
    shared_weights: bool = False
    #: the rows are selected by a padding mask (``jnp.where(mask[..., None], rows, 0)``)
    masked: bool = False

    @property
    def loop_selects(self) -> str:
        """The selects in XLA:CPU's loop over the rows: "clamp" (none), "fill" (jnp.take's
        NaN rows), "mask" or "mask_fill"."""
        if self.masked:
            return "mask_fill" if self.index_mode == "fill" else "mask"
        return "fill" if self.index_mode == "fill" else "clamp"

    @property
    def bare_clamp(self) -> bool:
        """The ids are clamped without wrapping negative ids first (jnp.take(mode="clip"))."""
        return self.index_mode == "clip" and not self.wrap_negative


def sum_order(bag: BagSum) -> str:
    """The order in which XLA:CPU adds a padded bag's P rows, as the kernel's ``sum_order``:
    "sequential", "sequential_fma" (weighted rows each added with a fused multiply-add, as
    XLA:CPU's fused multiply-reduce loop, its dot emitter and YNNPACK's dot do), "blocked"
    (native/blocked_sum.h), "vector8" or "tree32" (native/window_sum.h); raises
    OrderNotReproduced where none is XLA's. The one rule of the rewrite (padded bags and
    dot bags) and of ``ember_xla.embedding_bag``."""
    if bag.p == 1:
        # XLA's simplifier folds a reduce (or a dot) over one row away: the bag is its row,
        # times its weight (measured: rows of -0.0 stay -0.0, an init of 5 is dropped)
        raise OrderNotReproduced(
            f"bag [{bag.b},1,{bag.d}] of one row: XLA:CPU folds the reduce over it away (the "
            "bag is its row: a -0.0 stays -0.0, the init is not added), which the kernel, "
            "adding the row to the init, does not reproduce, so the cluster stays in XLA")
    if bag.form == "dot":
        return _dot_order(bag)
    b, p, d, reduce_type = bag.b, bag.p, bag.d, bag.reduce_type
    combiner, init, weighted = bag.combiner, bag.init, bag.weighted
    table_type = bag.table_type or reduce_type
    shape = f"[{b},{p},{d}] {reduce_type}" + (f" of {table_type} rows"
                                              if table_type != reduce_type else "")
    kept = "so the cluster stays in XLA"
    if reduce_type == "f32" and ynn_reduces(b * p * d):
        # YNNPACK's reduce (sum over f32, or over bf16/f16 rows converted to f32)
        if weighted and (bag.scale or bag.shared_weights) and table_type != "f16":
            # (f16: as its weighted bags)
            return _ynn_scaled(p, d, shape, combiner, init, table_type)
        if weighted:
            return _ynn_weighted(b, p, d, shape, combiner, init, table_type == "f16")
        if combiner not in ("sum", "mean"):
            raise OrderNotReproduced(f"{combiner} bag {shape}: YNNPACK's blocked order is "
                                     "reproduced for sum and mean only")
        if init != 0.0:
            raise OrderNotReproduced(f"bag {shape} starts at {init}: YNNPACK's blocked sum is "
                                     "reproduced from 0 only")
        if p >= BLOCKED_MAX_WIDTH:
            raise OrderNotReproduced(f"bag {shape}: XLA:CPU's YNNPACK order for bags of "
                                     f"{BLOCKED_MAX_WIDTH} or more rows is not reproduced, {kept}")
        _check_unit_rows(p, d, shape)
        _check_ynn_tiles(p, d, shape)
        return "blocked" if p > 4 else "sequential"
    if weighted and reduce_type == "f32" and p >= FMA_MAX_WIDTH:
        raise OrderNotReproduced(f"weighted bag {shape}: XLA:CPU's fused multiply-reduce loop "
                                 f"adds bags of {FMA_MAX_WIDTH} or more rows in an order that "
                                 f"is not reproduced, {kept}")
    index_type = "s32" if bag.index_type == "s32" else "s64"
    rows = table_type if reduce_type == "f32" and table_type in ("bf16", "f16") else "f32"
    limit = SEQUENTIAL_MAX_WIDTH[rows, index_type, bag.loop_selects]
    if p > limit:
        order = _own_loop_order(p, d, shape, reduce_type, table_type, index_type, combiner,
                                weighted, init, limit)
        if order == "vector8" and bag.bare_clamp:
            # jnp.take(mode="clip"): the clamp without the negative-id wrap changes the loop's
            # code, and its vectorized order is another (measured: 12 of 12 bags differ)
            raise OrderNotReproduced(
                f"bag {shape}, ids clamped without wrapping negatives: XLA:CPU's own loop "
                f"vectorizes this bag of {limit + 1}-{TREE_WINDOW} rows in an order that is "
                f"not reproduced, {kept}")
        return order
    if weighted and reduce_type == "f32":
        # a literal scale of jnp.take's fill-mode rows: LLVM moves the multiply by the
        # constant into the fill's select, between the product and the sum, and no longer fuses
        # them (measured: products rounded, then added in order)
        return ("sequential" if bag.scale == "constant" and bag.index_mode == "fill"
                else "sequential_fma")
    return "sequential"


def _check_unit_rows(p: int, d: int, shape: str) -> None:
    if d == 1 and p > UNIT_ROW_YNN_MAX_WIDTH:
        raise OrderNotReproduced(
            f"bag {shape} of one-value rows: XLA:CPU gives it to YNNPACK, which adds the "
            f"contiguous values in 16 interleaved partial sums, an order the kernel does not "
            f"reproduce beyond {UNIT_ROW_YNN_MAX_WIDTH} rows, so the cluster stays in XLA")


def _ynn_scaled(p: int, d: int, shape: str, combiner: str, init: float, rows: str) -> str:
    """f32 rows scaled by one number at YNNPACK sizes: the multiply by a broadcast scalar is
    not turned into a dot; YNNPACK sums the rounded products in its unweighted order (blocked
    beyond 4 rows; measured at B*P*D from 5,120 to 40,960, P 3..40). bf16 rows: not
    reproduced (measured 2.4e-07 from XLA at [256,12,32])."""
    if rows != "f32":
        raise OrderNotReproduced(
            f"bag {shape} scaled by one number: XLA:CPU multiplies by the scalar outside "
            f"YNNPACK's dot and sums the products in an order the kernel does not reproduce "
            f"for {rows} rows, so the cluster stays in XLA")
    if combiner != "sum" or init != 0.0:
        raise OrderNotReproduced(f"scaled {combiner} bag {shape} starting at {init}: YNNPACK's "
                                 "order is reproduced for scaled sums from 0 only, so the "
                                 "cluster stays in XLA")
    if p >= BLOCKED_MAX_WIDTH:
        raise OrderNotReproduced(f"scaled bag {shape}: XLA:CPU's YNNPACK order for bags of "
                                 f"{BLOCKED_MAX_WIDTH} or more rows is not reproduced, so the "
                                 "cluster stays in XLA")
    _check_unit_rows(p, d, shape)
    _check_ynn_tiles(p, d, shape)
    return "blocked" if p > 4 else "sequential"


def _dot_order(bag: BagSum) -> str:
    """A dot of f32 rows [B,P,D] with weights [B,P] over P. Measured on XLA:CPU (jax/jaxlib
    0.10.2, AMD EPYC with AVX-512 and with AVX2; tests/rewrites/test_dot_bag.py): for D >= 3
    its dot adds the products one after the other with fused multiply-adds at every B, P and D tried
    (unlike a weighted reduce, which YNNPACK turns into a dot of other orders); at D = 1
    XLA's simplifier turns the dot into a multiply and a reduce, whose rule applies; at D = 2
    the dot stays a dot and its order (which varies with B and P) is not reproduced."""
    if bag.reduce_type != "f32" or (bag.table_type or "f32") != "f32" or not bag.weighted:
        raise OrderNotReproduced(f"dot bag [{bag.b},{bag.p},{bag.d}] of {bag.reduce_type}: only "
                                 "f32 bag products are modelled")
    if bag.d == 1:
        return sum_order(dataclasses.replace(bag, form="reduce"))
    if bag.d == DOT_UNREPRODUCED_DIM:
        raise OrderNotReproduced(
            f"dot bag [{bag.b},{bag.p},{bag.d}] f32: XLA:CPU's dot over rows of "
            f"{DOT_UNREPRODUCED_DIM} values adds them in an order that is not reproduced, so "
            "the cluster stays in XLA")
    return "sequential_fma"


def _own_loop_order(p: int, d: int, shape: str, reduce_type: str, table_type: str,
                    index_type: str, combiner: str, weighted: bool, init: float,
                    limit: int) -> str:
    """The order of XLA:CPU's own loop for a small bag of more than ``limit`` rows: "vector8"
    (f32 rows, 25-32 of them) or "tree32" (more than 32), or OrderNotReproduced."""
    kept = "so the cluster stays in XLA"
    if weighted or reduce_type != "f32" or combiner not in ("sum", "mean") or init != 0.0:
        raise OrderNotReproduced(
            f"bag {shape}: XLA:CPU's own reduce loop adds bags of more than {limit} rows in a "
            f"vectorized or windowed order, reproduced for unweighted f32 sum/mean bags "
            f"starting at 0 only, {kept}")
    if p <= TREE_WINDOW:
        if table_type != "f32" or index_type != "s32" or p < VECTOR_MIN_WIDTH or d < 2:
            raise OrderNotReproduced(
                f"bag {shape}, {index_type} indices: XLA:CPU's own loop vectorizes this bag of "
                f"{limit + 1}-{TREE_WINDOW} rows in an order reproduced for f32 rows, s32 "
                f"indices, D >= 2 and {VECTOR_MIN_WIDTH}-{TREE_WINDOW} rows only, {kept}")
        return "vector8"
    if -(-p // TREE_WINDOW) > TREE_MAX_WINDOWS:
        raise OrderNotReproduced(
            f"bag {shape}: more than {TREE_MAX_WINDOWS} tree-reduction windows of "
            f"{TREE_WINDOW} rows; the order of their sums is not reproduced, {kept}")
    return "tree32"
