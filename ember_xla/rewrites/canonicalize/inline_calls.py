"""``inline-calls``: inline every ``call`` (JAX's ``_take``, ``_where``, ``_one_hot``,
``remainder`` helpers ...), so the lookup, its masking and its index arithmetic sit in one
computation. XLA inlines calls itself (CallInliner), so this changes no semantics; it is what
lets ``jnp.take(mode='wrap')``'s floor-mod stay in XLA while the gather is rewritten, and the
other canonicalizations see ``jnp.where`` masks and ``jax.nn.one_hot``.

Calls that return a tuple (the JVP/linearize wrappers of ``value_and_grad`` steps:
``jvp_jit__take__`` returns the looked-up rows and the indices its transpose reuses) are inlined
too; ``fold-tuple-index`` then reads through the tuple, so a training step's forward lookup sits
in the entry computation like an inference one."""

from __future__ import annotations

from ember_xla.hlo.inline import inline_call
from ember_xla.ir.graph import Module
from ember_xla.ir.operation import Operation
from ember_xla.ir.passes import register_pass
from ember_xla.ir.rewriter import PatternRewriter, RewritePattern
from ember_xla.rewrites.canonicalize.base import PatternPass


class InlineCall(RewritePattern):
    def match_and_rewrite(self, op: Operation, rw: PatternRewriter) -> None:
        if op.opcode != "call" or len(op.callees) != 1 or len(op.results) != 1:
            return
        callee = op.callees[0]
        if callee.root is None or any(len(o.results) != 1 for o in callee.ops):
            return
        inline_call(op, rw)


@register_pass
class InlineCalls(PatternPass):
    name = "inline-calls"
    rewrites = (InlineCall,)

    def apply(self, module: Module) -> None:
        super().apply(module)
        module.remove_unreachable_graphs()
