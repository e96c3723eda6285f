"""The state of one cluster match: which top-level ops the cluster owns (and will erase), and
the reason a match failed (every failure carries one, as Inductor's FailedMatch does)."""

from __future__ import annotations

from ember_xla.ir.operation import Operation
from ember_xla.rewrites.refs import Ref, resolve


class NoMatch(Exception):
    """A pattern does not apply; ``str(e)`` says why. ``report``: list it as a near-miss even
    when no gather is nearby (the matcher's default test)."""

    report = False


class Walk:
    """Ops a match claims. A top-level op may be claimed only if every user is claimed already
    (interior values must not escape the cluster); ops inside called computations are reached
    through a claimed ``call`` and need no claim."""

    def __init__(self, root: Operation) -> None:
        self.root = root
        self.owned: list[Operation] = [root]
        self._ids = {id(root)}

    def owns(self, op: Operation) -> bool:
        return id(op) in self._ids

    def can_take(self, ref: Ref) -> bool:
        if not ref.top:
            return True  # inside a called computation reached through a claimed call
        return all(self.owns(u) for u in ref.op.users)

    def take(self, ref: Ref) -> None:
        """Claim ``ref``'s op (ops inside called computations need no claim)."""
        if ref.top:
            if not self.can_take(ref):
                users = ", ".join(u.name for u in ref.op.users if not self.owns(u))
                raise NoMatch(f"{ref.op.name} is also used outside the cluster (by {users})")
            self._claim(ref.op)

    def snapshot(self) -> int:
        return len(self.owned)

    def restore(self, mark: int) -> None:
        """Forget the claims made since ``snapshot`` returned ``mark``."""
        for op in self.owned[mark:]:
            self._ids.discard(id(op))
        del self.owned[mark:]

    def enter(self, ref: Ref) -> Ref:
        """``resolve`` through calls, claiming every top-level call it steps into (a call whose
        result is also used elsewhere cannot be part of the cluster)."""
        calls: list[Operation] = []
        out = resolve(ref, calls)
        for c in calls:
            self._claim(c)
        return out

    def _claim(self, op: Operation) -> None:
        if id(op) in self._ids:
            return
        outside = [u.name for u in op.users if id(u) not in self._ids]
        if outside:
            raise NoMatch(f"{op.name} is also used outside the cluster (by {', '.join(outside)})")
        self._ids.add(id(op))
        self.owned.append(op)
