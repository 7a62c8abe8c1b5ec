"""A minimal protobuf wire-format reader, independent of the protobuf package.

Used by the Chakra tests to decode written traces against the published schema's field
numbers (mlcommons/chakra, schema/protobuf/et_def.proto), not against the descriptors the
package builds: if both drifted the same way, the package's own round trip would not notice.
"""

from __future__ import annotations

from typing import Any


def varint(data: bytes, pos: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, pos


def fields(data: bytes) -> list[tuple[int, int, Any]]:
    """(field number, wire type, value) of one message; length-delimited values are bytes."""
    out, pos = [], 0
    while pos < len(data):
        key, pos = varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = varint(data, pos)
        elif wire == 1:
            value, pos = data[pos:pos + 8], pos + 8
        elif wire == 2:
            size, pos = varint(data, pos)
            value, pos = data[pos:pos + size], pos + size
        elif wire == 5:
            value, pos = data[pos:pos + 4], pos + 4
        else:
            raise ValueError(f"wire type {wire} at byte {pos}")
        out.append((number, wire, value))
    return out


def delimited(data: bytes) -> list[bytes]:
    """The messages of a varint-length-prefixed stream."""
    out, pos = [], 0
    while pos < len(data):
        size, pos = varint(data, pos)
        out.append(data[pos:pos + size])
        pos += size
    assert pos == len(data), "the stream ends inside a message"
    return out


def packed(data: bytes) -> list[int]:
    out, pos = [], 0
    while pos < len(data):
        value, pos = varint(data, pos)
        out.append(value)
    return out
