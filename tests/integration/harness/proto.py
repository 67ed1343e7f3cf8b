"""Protobuf's binary wire format for the permit.v1 messages, by field
number: enough to build a request and read an answer without generated
code (the tests check the wire bytes themselves)."""


def _varint(v):
    if v < 0:
        v += 1 << 64
    out = b""
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def pb_encode(fields):
    """fields: list of (number, value); str -> length-delimited, int/bool -> varint."""
    out = b""
    for num, v in fields:
        if isinstance(v, (bytes, str)):
            b = v.encode() if isinstance(v, str) else v
            out += _varint(num << 3 | 2) + _varint(len(b)) + b
        else:
            out += _varint(num << 3) + _varint(int(v))
    return out


def _read_varint(data, i):
    """Returns (value, index after it) of the varint at data[i]."""
    v, shift = 0, 0
    while True:
        b = data[i]
        i += 1
        v |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return v, i


def pb_decode(data):
    """Returns {field number: value} for varint and length-delimited fields."""
    out, i = {}, 0
    while i < len(data):
        key, i = _read_varint(data, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = _read_varint(data, i)
            out[num] = v - (1 << 64) if v >= 1 << 63 else v
        elif wt == 2:
            n, i = _read_varint(data, i)
            out[num] = data[i:i + n]
            i += n
        else:
            raise ValueError("wire type %d" % wt)
    return out


ACQUIRE_RESPONSE = {1: "allowed", 2: "remaining", 3: "limit", 4: "retry_after_ms", 5: "reset_after_ms"}
PEEK_RESPONSE = {1: "remaining", 2: "limit", 3: "reset_after_ms"}


def pb_named(data, names):
    """Decodes and names fields; absent fields read as their proto3 default 0."""
    raw = pb_decode(data)
    return {name: raw.get(num, 0) for num, name in names.items()}
