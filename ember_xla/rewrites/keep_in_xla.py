"""Put a rewritten cluster back into XLA: its ``ember.*`` custom-call becomes a ``call`` of the
computation it was outlined into, which holds the cluster's original ops (XLA inlines the
call and compiles them as before). Used where the decision to keep a cluster in XLA can only be
taken after outlining (an unfused gradient: profitability.py, ``gradient_split``)."""

from __future__ import annotations

from ember_xla.ir.graph import Module
from ember_xla.ir.operation import Operation
from ember_xla.ir.rewriter import PatternRewriter


def find_call(module: Module, name: str) -> Operation:
    """The custom-call named ``name`` (a report entry's ``custom_call``) in any computation."""
    for op in module.walk():
        if op.opcode == "custom-call" and op.name == name:
            return op
    raise ValueError(f"no custom-call {name} in module {module.name}")


def keep_in_xla(module: Module, name: str, rw: PatternRewriter) -> Operation:
    """Replace the custom-call ``name`` by a ``call`` of its outlined computation; the call."""
    cc = find_call(module, name)
    if len(cc.callees) != 1:
        raise ValueError(f"custom-call {name} has {len(cc.callees)} callees, not its outlined "
                         "computation")
    call = Operation("call", list(cc.operands), [cc.result.type], callees=[cc.callees[0]],
                     name=name.replace("ember_", "xla_", 1))
    md = cc.attributes.get("metadata")
    if md:
        call.attributes["metadata"] = dict(md)
    rw.insert_before(cc, call)
    rw.replace_op(cc, call)
    return call
