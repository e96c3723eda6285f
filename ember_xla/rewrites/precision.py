"""The precision rule: a cluster is rewritten only where its kernel computes what XLA:CPU
computes for the original under the compile options the module will run with
(``xla_allow_excess_precision`` true, XLA's default, or false); elsewhere it stays in XLA with
the reason. docs/CUSTOM_CALL.md ("One precision rule") lists what XLA:CPU does and what the
kernels do; tests/rewrites/test_precision.py checks every case against XLA:CPU."""

from __future__ import annotations

import math

from ember_xla.native.padded_order import YNN_MIN_ELEMENTS, OrderNotReproduced, ynn_reduces
from ember_xla.rewrites import ynn_fusions
from ember_xla.rewrites.cluster import Cluster
from ember_xla.rewrites.compile_time import folded_by_xla
from ember_xla.util.xla_flags import xla_flag_values


def excess_precision_from_env() -> bool:
    """The ``xla_allow_excess_precision`` XLA:CPU compiles with in this process: the last
    ``--xla_allow_excess_precision[=true|false]`` of ``XLA_FLAGS``, else XLA's default (true).
    An unreadable value is a ``ValueError``."""
    value = True
    for given in xla_flag_values("xla_allow_excess_precision"):
        word = (given or "true").lower()
        if word not in ("true", "false", "1", "0"):
            raise ValueError(f"XLA_FLAGS: --xla_allow_excess_precision={given} is not "
                             "true or false")
        value = word in ("true", "1")
    return value


def _weights_type(c: Cluster) -> str | None:
    for v, role in zip(c.inputs, c.input_roles, strict=True):
        if role == "weights":
            return v.type.element_type
    return None


def _bag_elements(c: Cluster) -> int:
    """B * P * D of a padded bag: the elements of the [B, P, D] rows its reduce sums."""
    return math.prod(c.inputs[c.input_roles.index("ids")].type.dims) * c.table.type.dims[-1]


def refusal(c: Cluster, excess_precision: bool) -> str | None:
    """Why the kernel of ``c`` cannot compute what XLA:CPU computes with this setting (None:
    it does). The one case: a bf16 bag weighted in bf16 and reduced in f32 (``jnp.sum`` /
    ``tf.reduce_sum`` of ``rows * w``) of fewer than YNN_MIN_ELEMENTS rows' elements. XLA:CPU
    does bf16 arithmetic in f32; with excess precision allowed it drops the product's
    f32 -> bf16 -> f32 round trip (the kernel's form: the exact f32 product), without it its own
    reduce loop rounds the product to bf16 first. From YNN_MIN_ELEMENTS on the reduce goes to
    YNNPACK, which takes the exact f32 product under both settings (measured:
    tests/rewrites/test_padded_order.py, test_precision.py), as the kernel does."""
    if excess_precision or c.kind != "padded_bag" or not c.attrs.get("weighted"):
        return None
    table = c.table.type.element_type
    result = c.root.result.type.element_type if c.root.result.type.is_array else None
    if table == "bf16" and result == "f32" and _weights_type(c) == "bf16" and \
            not _ynn_reduces(_bag_elements(c)):
        return ("with xla_allow_excess_precision=false XLA:CPU's own reduce loop (bags of "
                f"fewer than {YNN_MIN_ELEMENTS} elements) rounds each bf16 product row * "
                "weight to bf16 before the f32 sum; the kernel keeps the exact f32 product "
                "(what XLA computes with excess precision allowed, its default, and from "
                f"{YNN_MIN_ELEMENTS} elements under both settings), so the cluster stays in "
                "XLA")
    return None


def _ynn_reduces(elements: int) -> bool:
    """``padded_order.ynn_reduces``; an XLA_FLAGS setting it does not model counts as XLA's
    own loop (the rounding rule above then keeps the cluster in XLA)."""
    try:
        return ynn_reduces(elements)
    except OrderNotReproduced:
        return False


def split(clusters: list[Cluster], excess_precision: bool
          ) -> tuple[list[Cluster], list[tuple[Cluster, str]]]:
    """(clusters the kernels compute exactly, [(cluster kept in XLA, reason)]): the rounding
    rule above, clusters XLA:CPU computes at compile time (``compile_time``) and those whose
    value is rounded after them in a way the rewrite would change (``ynn_fusions``)."""
    keep, refused = [], []
    for c in clusters:
        why = (refusal(c, excess_precision) or folded_by_xla(c)
               or ynn_fusions.rounding_refusal(c.root))
        if why is None:
            keep.append(c)
        else:
            refused.append((c, why))
    return keep, refused
