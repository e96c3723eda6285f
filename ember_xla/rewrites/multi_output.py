"""Multi-output clusters: ``ember.segment_reduce`` calls of one computation that read the same
lookup -- one gather feeding ``segment_sum`` and ``segment_max`` (jraph/PNA multi-aggregators),
split into one cluster per reduction by ``split-shared-lookup`` -- merged into one
``ember.multi_segment_reduce`` call with one result per reduction (a tuple), which builds the
plan once and reads the rows once (docs/CUSTOM_CALL.md).

Calls merge when they agree in index handling (``index_mode``, ``wrap_negative``,
``index_bits``), in the number of segments and in being weighted, and their table, indices,
segment ids (and weights) are the same values or computed by identical pure instructions from
the same values (split-shared-lookup copies the index arithmetic the cluster does not absorb,
e.g. the floor-mod of ``jnp.take(mode='wrap')``). The call's reference computation calls each
member's outlined computation and tuples the results. A mean's count (``segment_sum`` of ones)
reads no rows and stays in XLA beside the call."""

from __future__ import annotations

from ember_xla.custom_calls import ATTRS_KEY, MULTI_SEGMENT_REDUCE, SEGMENT_REDUCE, call_attributes
from ember_xla.hlo.shape import Shape
from ember_xla.ir.graph import Graph, Module
from ember_xla.ir.operation import Operation
from ember_xla.ir.rewriter import PatternRewriter
from ember_xla.ir.value import Value
from ember_xla.rewrites.canonicalize.base import PURE
from ember_xla.rewrites.group_tables import _ancestors
from ember_xla.rewrites.same_value import same_value

MULTI = MULTI_SEGMENT_REDUCE.name


def _key(op: Operation) -> tuple:
    a = call_attributes(op)
    return (a["index_mode"], a["wrap_negative"], a["index_bits"], a["weighted"],
            len(op.operands), op.result.type.dims[0])


def _groups(g: Graph) -> list[list[Operation]]:
    calls = [op for op in g.topological() if op.opcode == "custom-call"
             and op.attributes.get("custom_call_target") == SEGMENT_REDUCE.name]
    groups: list[list[Operation]] = []
    for c in calls:
        for grp in groups:
            head = grp[0]
            if _key(head) == _key(c) and all(
                    same_value(x, y) for x, y in zip(head.operands, c.operands, strict=True)):
                anc = _ancestors(c)
                if not any(id(m) in anc for m in grp) and not any(
                        id(c) in _ancestors(m) for m in grp):
                    grp.append(c)
                    break
        else:
            groups.append([c])
    return [grp for grp in groups if len(grp) > 1]


def _reference(module: Module, members: list[Operation], name: str) -> Graph:
    comp = Graph(module.unique_graph_name(name))
    params = [comp.append(Operation("parameter", [], [v.type], {"parameter_number": i},
                                    name=role)).result
              for i, (v, role) in enumerate(zip(members[0].operands,
                                                MULTI_SEGMENT_REDUCE.operand_roles
                                                + ("weights",), strict=False))]
    outs = [comp.append(Operation("call", params, [m.result.type], {}, [m.callees[0]],
                                  name=f"result{i}")).result for i, m in enumerate(members)]
    comp.root = comp.append(Operation("tuple", outs, [Shape.tuple_of([o.type for o in outs])],
                                      name="results"))
    return comp


def _erase_dead_copies(g: Graph, values: list[Value], rw: PatternRewriter) -> None:
    """Erase the pure instructions computing ``values`` that nothing uses any more (the other
    members' copies of the index arithmetic); parameters and the root stay."""
    stack = [v.owner for v in values]
    while stack:
        op = stack.pop()
        if (not isinstance(op, Operation) or op.parent is not g or op.users or op is g.root
                or op.opcode == "parameter" or op.opcode not in PURE):
            continue
        producers = [v.owner for v in op.operands]
        rw.erase(op)
        stack.extend(producers)


def merge_multi_output(module: Module, rewriter: PatternRewriter | None = None) -> list[dict]:
    """Merge in place (every edit through ``rewriter``); one entry per merged call (its name,
    the members' outlined computations and the combiners)."""
    rw = rewriter or PatternRewriter()
    made = []
    for g in list(module.graphs):
        for members in _groups(g):
            kernel = [call_attributes(m) for m in members]
            attrs = {k: v for k, v in members[0].attributes.items()
                     if k not in ("metadata", ATTRS_KEY)}
            attrs["custom_call_target"] = MULTI
            attrs[ATTRS_KEY] = {
                "combiners": ",".join(a["combiner"] for a in kernel),
                "inits": ",".join(repr(float(a["init"])) for a in kernel),
                "index_mode": kernel[0]["index_mode"],
                "wrap_negative": kernel[0]["wrap_negative"],
                "weighted": kernel[0]["weighted"],
                "index_bits": kernel[0]["index_bits"]}
            comp = _reference(module, members, f"{MULTI}.{len(made)}")
            module.add(comp, before=g)
            # the first member's operands are defined before it; users of later members that
            # sat before the call are put back in dependency order by the sort
            first = members[0]
            tshape = Shape.tuple_of([m.result.type for m in members])
            call = rw.insert_before(first, Operation(
                "custom-call", list(first.operands), [tshape], attrs, [comp],
                name="ember_multi_segment_reduce"))
            for i, m in enumerate(members):
                gte = rw.insert_before(first, Operation(
                    "get-tuple-element", [call.result], [m.result.type], {"tuple_index": i},
                    name=m.name))
                rw.replace_all_uses(m.result, gte.result)
            copies = [v for m in members[1:] for v in m.operands]
            for m in members:
                rw.erase(m)
            _erase_dead_copies(g, copies, rw)
            rw.sort_topologically(g)
            made.append({"custom_call": call.name, "multi_output": True,
                         "members": [m.callees[0].name for m in members],
                         "combiners": [a["combiner"] for a in kernel]})
    return made
