"""Generic, lossless conversion between protobuf messages and plain Python dicts.

Messages become dicts of their *present* fields, repeated fields lists, enums their names, maps
dicts; bytes stay bytes. Fields the installed schema does not know (a newer XLA wrote them) are
kept, re-encoded, under ``UNKNOWN``. ``to_message`` is the exact inverse.
"""

from __future__ import annotations

from typing import Any


UNKNOWN = "__unknown_fields__"


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


def unknown_bytes(msg: Any) -> bytes:
    """The wire bytes of the fields of ``msg`` that its schema does not know."""
    from google.protobuf.unknown_fields import UnknownFieldSet

    ufs = UnknownFieldSet(msg)
    if not len(ufs):
        return b""
    out = bytearray()
    _encode_unknown(ufs, out)
    return bytes(out)


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
    unknown = unknown_bytes(msg)
    if unknown:
        out[UNKNOWN] = unknown
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
        if key == UNKNOWN:
            msg.MergeFromString(value)
            continue
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
