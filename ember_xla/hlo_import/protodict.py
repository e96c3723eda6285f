"""Generic, lossless conversion between protobuf messages and plain Python dicts.

Messages become dicts of their *present* fields, repeated fields lists, enums their names, maps
dicts; bytes stay bytes. Fields the installed schema does not know (a newer XLA wrote them) are
kept, re-encoded, under ``UNKNOWN``. ``to_message`` is the exact inverse.

How each field converts is worked out once per field descriptor and cached (``_KINDS``), so the
per-message work is one ``ListFields`` and a loop of dict lookups.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

UNKNOWN = "__unknown_fields__"

# Field kinds.
_SCALAR, _ENUM, _MSG, _REP_SCALAR, _REP_ENUM, _REP_MSG, _MAP, _UNKNOWN_KEY = range(8)


def _varint(n: int, out: bytearray) -> None:
    n &= (1 << 64) - 1
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return


def _encode_unknown(fields: Any, out: bytearray) -> None:
    for f in fields:
        _varint((f.field_number << 3) | f.wire_type, out)
        if f.wire_type == 0:
            _varint(f.data, out)
        elif f.wire_type == 1:
            out += int(f.data).to_bytes(8, "little")
        elif f.wire_type == 2:
            _varint(len(f.data), out)
            out += f.data
        elif f.wire_type == 5:
            out += int(f.data).to_bytes(4, "little")
        elif f.wire_type == 3:
            _encode_unknown(f.data, out)
            _varint((f.field_number << 3) | 4, out)


_UnknownFieldSet: Any = None


def unknown_bytes(msg: Any) -> bytes:
    """The wire bytes of the fields of ``msg`` that its schema does not know."""
    global _UnknownFieldSet
    if _UnknownFieldSet is None:
        from google.protobuf.unknown_fields import UnknownFieldSet

        _UnknownFieldSet = UnknownFieldSet
    ufs = _UnknownFieldSet(msg)
    if not len(ufs):
        return b""
    out = bytearray()
    _encode_unknown(ufs, out)
    return bytes(out)


def _is_map(field: Any) -> bool:
    mt = field.message_type
    return mt is not None and mt.GetOptions().map_entry


# field descriptor -> (kind, name, enum number->name cache or map value field)
_KINDS: dict[Any, tuple[int, str, Any]] = {}


def _kind(field: Any) -> tuple[int, str, Any]:
    k = _KINDS.get(field)
    if k is not None:
        return k
    if _is_map(field):
        k = (_MAP, field.name, field.message_type.fields_by_name["value"])
    else:
        base = (_MSG if field.type == field.TYPE_MESSAGE
                else _ENUM if field.type == field.TYPE_ENUM else _SCALAR)
        if field.is_repeated:
            base += _REP_SCALAR
        k = (base, field.name, {} if base in (_ENUM, _REP_ENUM) else None)
    _KINDS[field] = k
    return k


def _enum_name(field: Any, names: dict[int, Any], value: int) -> Any:
    name = names.get(value)
    if name is None:
        ev = field.enum_type.values_by_number.get(value)
        name = names[value] = ev.name if ev is not None else int(value)
    return name


def _scalar_out(field: Any, value: Any) -> Any:
    if field.type == field.TYPE_ENUM:
        ev = field.enum_type.values_by_number.get(value)
        return ev.name if ev is not None else int(value)
    if field.type == field.TYPE_MESSAGE:
        return to_dict(value)
    return value


Special = dict[Any, Callable[[Any], Any]]


def to_dict(msg: Any, special: Special | None = None) -> dict[str, Any]:
    """``msg`` as a dict. ``special`` maps singular message field descriptors to converters
    used instead of ``to_dict`` for their values."""
    out: dict[str, Any] = {}
    unknown = unknown_bytes(msg)
    if unknown:
        out[UNKNOWN] = unknown
    kinds = _KINDS
    for field, value in msg.ListFields():
        kind, name, extra = kinds.get(field) or _kind(field)
        if kind == _SCALAR:
            out[name] = value
        elif kind == _MSG:
            fn = special.get(field) if special else None
            out[name] = fn(value) if fn else to_dict(value, special)
        elif kind == _REP_SCALAR:
            out[name] = value[:]  # a list
        elif kind == _ENUM:
            v = extra.get(value)
            out[name] = v if v is not None else _enum_name(field, extra, value)
        elif kind == _REP_MSG:
            out[name] = [to_dict(v, special) for v in value]
        elif kind == _REP_ENUM:
            out[name] = [extra.get(v) if v in extra else _enum_name(field, extra, v)
                         for v in value]
        else:  # map
            vf = extra
            out[name] = {k: (to_dict(v, special)
                             if vf.type == vf.TYPE_MESSAGE else _scalar_out(vf, v))
                         for k, v in value.items()}
    return out


def _scalar_in(field: Any, value: Any) -> Any:
    if field.type == field.TYPE_ENUM and isinstance(value, str):
        ev = field.enum_type.values_by_name.get(value)
        if ev is None:
            raise ValueError(f"{field.full_name}: unknown enum value {value!r}")
        return ev.number
    return value


# message descriptor -> {key: (kind, field)}
_PLANS: dict[Any, dict[str, tuple[int, Any]]] = {}


def _plan(desc: Any) -> dict[str, tuple[int, Any]]:
    plan = _PLANS.get(desc)
    if plan is None:
        plan = {f.name: (_kind(f)[0], f) for f in desc.fields}
        plan[UNKNOWN] = (_UNKNOWN_KEY, None)
        _PLANS[desc] = plan
    return plan


def to_message(d: dict[str, Any], msg: Any) -> Any:
    """Fill ``msg`` from ``d`` (as produced by ``to_dict``) and return it."""
    desc = msg.DESCRIPTOR
    plan = _PLANS.get(desc) or _plan(desc)
    for key, value in d.items():
        p = plan.get(key)
        if p is None:
            raise ValueError(f"{desc.full_name} has no field {key!r}")
        kind, field = p
        if kind == _SCALAR:
            setattr(msg, key, value)
        elif kind == _REP_SCALAR:
            getattr(msg, key).extend(value)
        elif kind == _MSG:
            target = getattr(msg, key)
            target.SetInParent()
            to_message(value, target)
        elif kind == _ENUM:
            setattr(msg, key, _scalar_in(field, value))
        elif kind == _REP_MSG:
            target = getattr(msg, key)
            for item in value:
                to_message(item, target.add())
        elif kind == _REP_ENUM:
            getattr(msg, key).extend([_scalar_in(field, v) for v in value])
        elif kind == _UNKNOWN_KEY:
            msg.MergeFromString(value)
        else:  # map
            target = getattr(msg, key)
            vf = field.message_type.fields_by_name["value"]
            for k, v in value.items():
                if vf.type == vf.TYPE_MESSAGE:
                    to_message(v, target[k])
                else:
                    target[k] = _scalar_in(vf, v)
    return msg
