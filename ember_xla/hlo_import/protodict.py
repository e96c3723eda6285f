"""Generic, lossless conversion between protobuf messages and plain Python dicts.

Messages become dicts of their *present* fields, repeated fields lists, enums their names, maps
dicts; bytes stay bytes. ``to_message`` is the exact inverse.
"""

from __future__ import annotations

from typing import Any


def _is_map(field: Any) -> bool:
    mt = field.message_type
    return mt is not None and mt.GetOptions().map_entry


def _scalar_out(field: Any, value: Any) -> Any:
    if field.type == field.TYPE_ENUM:
        ev = field.enum_type.values_by_number.get(value)
        return ev.name if ev is not None else int(value)
    if field.type == field.TYPE_MESSAGE:
        return to_dict(value)
    return value


def to_dict(msg: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for field, value in msg.ListFields():
        if _is_map(field):
            vf = field.message_type.fields_by_name["value"]
            out[field.name] = {k: _scalar_out(vf, v) for k, v in value.items()}
        elif field.is_repeated:
            out[field.name] = [_scalar_out(field, v) for v in value]
        else:
            out[field.name] = _scalar_out(field, value)
    return out


def _scalar_in(field: Any, value: Any) -> Any:
    if field.type == field.TYPE_ENUM and isinstance(value, str):
        ev = field.enum_type.values_by_name.get(value)
        if ev is None:
            raise ValueError(f"{field.full_name}: unknown enum value {value!r}")
        return ev.number
    return value


def to_message(d: dict[str, Any], msg: Any) -> Any:
    """Fill ``msg`` from ``d`` (as produced by ``to_dict``) and return it."""
    desc = msg.DESCRIPTOR
    for key, value in d.items():
        field = desc.fields_by_name.get(key)
        if field is None:
            raise ValueError(f"{desc.full_name} has no field {key!r}")
        target = getattr(msg, key)
        if _is_map(field):
            vf = field.message_type.fields_by_name["value"]
            for k, v in value.items():
                if vf.type == vf.TYPE_MESSAGE:
                    to_message(v, target[k])
                else:
                    target[k] = _scalar_in(vf, v)
        elif field.is_repeated:
            if field.type == field.TYPE_MESSAGE:
                for item in value:
                    to_message(item, target.add())
            else:
                target.extend(_scalar_in(field, v) for v in value)
        elif field.type == field.TYPE_MESSAGE:
            target.SetInParent()
            to_message(value, target)
        else:
            setattr(msg, key, _scalar_in(field, value))
    return msg
