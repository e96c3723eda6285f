"""Module passes, a registry of them by name, pipeline strings such as
``"pass-a,pass-b{opt=1 other=x}"``, and the one pass driver (``PassPipeline``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, ClassVar

from ember_xla.ir.graph import Module


class PipelineError(ValueError):
    """A pipeline string names an unknown pass or gives a bad option."""


@dataclasses.dataclass(frozen=True)
class ModulePass:
    """Base class: subclasses are frozen dataclasses whose fields are the pipeline options."""

    name: ClassVar[str] = ""

    def apply(self, module: Module) -> None:
        raise NotImplementedError


_REGISTRY: dict[str, type[ModulePass]] = {}


def register_pass(cls: type[ModulePass]) -> type[ModulePass]:
    if not cls.name:
        raise ValueError(f"{cls.__name__} has no pass name")
    _REGISTRY[cls.name] = cls
    return cls


def registered_passes() -> dict[str, type[ModulePass]]:
    return dict(_REGISTRY)


def _convert(field: dataclasses.Field, raw: str, pass_name: str) -> Any:
    kind = field.type if isinstance(field.type, str) else getattr(field.type, "__name__", "")
    try:
        if kind == "bool":
            if raw.lower() not in ("true", "false", "1", "0"):
                raise ValueError(raw)
            return raw.lower() in ("true", "1")
        if kind == "int":
            return int(raw)
        if kind == "float":
            return float(raw)
    except ValueError:
        raise PipelineError(
            f"pass {pass_name}: option {field.name} expects {kind}, got {raw!r}"
        ) from None
    return raw


def _split_top(text: str) -> list[str]:
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth < 0:
                raise PipelineError(f"unbalanced '}}' in pipeline {text!r}")
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if depth:
        raise PipelineError(f"unbalanced '{{' in pipeline {text!r}")
    parts.append("".join(cur))
    return [p.strip() for p in parts if p.strip()]


def parse_pipeline(text: str) -> list[ModulePass]:
    """Parse ``"a,b{x=1 y=2}"`` into pass instances (options separated by spaces or commas)."""
    passes: list[ModulePass] = []
    for item in _split_top(text):
        name, _, rest = item.partition("{")
        name = name.strip()
        if name not in _REGISTRY:
            known = ", ".join(sorted(_REGISTRY)) or "none"
            raise PipelineError(f"unknown pass {name!r} (known: {known})")
        cls = _REGISTRY[name]
        fields = {f.name: f for f in dataclasses.fields(cls)}
        kwargs: dict[str, Any] = {}
        if rest:
            if not rest.endswith("}"):
                raise PipelineError(f"pass {name}: options must end with '}}'")
            for opt in rest[:-1].replace(",", " ").split():
                key, eq, val = opt.partition("=")
                if not eq:
                    raise PipelineError(f"pass {name}: option {opt!r} is not key=value")
                if key not in fields:
                    raise PipelineError(
                        f"pass {name}: unknown option {key!r} (options: {', '.join(fields)})"
                    )
                kwargs[key] = _convert(fields[key], val, name)
        passes.append(cls(**kwargs))
    return passes


def pipeline_string(passes: list[ModulePass]) -> str:
    out = []
    for p in passes:
        opts = " ".join(f"{f.name}={getattr(p, f.name)}" for f in dataclasses.fields(p))
        out.append(f"{p.name}{{{opts}}}" if opts else p.name)
    return ",".join(out)


@dataclasses.dataclass(frozen=True)
class PassPipeline:
    """The one pass driver (xDSL's ``PassPipeline`` shape): the passes in order (or parsed from
    a spec with :meth:`from_spec`), ``verify(module, pass)`` between passes, and
    ``callback(pass, module, what_the_pass_returned)`` after each (printing, reports,
    snapshots). ``on_error(pass, error)`` may turn an error of a pass into another exception
    (returning None re-raises the original)."""

    passes: tuple[ModulePass, ...]
    verify: Callable[[Module, ModulePass], None] | None = None
    callback: Callable[[ModulePass, Module, Any], None] | None = None
    on_error: Callable[[ModulePass, Exception], Exception | None] | None = None

    @classmethod
    def from_spec(cls, spec: str | list[ModulePass], **hooks: Any) -> PassPipeline:
        passes = parse_pipeline(spec) if isinstance(spec, str) else list(spec)
        return cls(tuple(passes), **hooks)

    def apply(self, module: Module) -> Module:
        """Run every pass on ``module`` in place; returns it."""
        for p in self.passes:
            try:
                report = p.apply(module)
            except Exception as e:
                replaced = self.on_error(p, e) if self.on_error is not None else None
                if replaced is None:
                    raise
                raise replaced from None
            if self.verify is not None:
                self.verify(module, p)
            if self.callback is not None:
                self.callback(p, module, report)
        return module
