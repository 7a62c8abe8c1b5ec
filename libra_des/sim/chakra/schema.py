"""Chakra's protobuf schema built at run time, and the length-delimited file codec.

The message classes come from a ``FileDescriptorProto`` assembled here from the field table
of ``et_def.proto`` (same names, numbers and types; ``tests/test_chakra.py`` checks the two
agree), so no generated code and no ``protoc`` step are needed: protobuf's runtime alone.

A trace file is one ``GlobalMetadata`` message followed by ``Node`` messages, each preceded
by its byte length as a base-128 varint (protobuf's length-delimited stream framing).
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

from libra_des.errors import InputError

PACKAGE = "ChakraProtoMsg"
#: Node types (enum NodeType).
NODE_TYPES = ("INVALID_NODE", "METADATA_NODE", "MEM_LOAD_NODE", "MEM_STORE_NODE", "COMP_NODE",
              "COMM_SEND_NODE", "COMM_RECV_NODE", "COMM_COLL_NODE")
COMP_NODE, COMM_SEND_NODE, COMM_RECV_NODE, COMM_COLL_NODE = 4, 5, 6, 7
#: Collective types (enum CollectiveCommType), in enum order.
COLLECTIVE_TYPES = ("ALL_REDUCE", "REDUCE", "ALL_GATHER", "GATHER", "SCATTER", "BROADCAST",
                    "ALL_TO_ALL", "REDUCE_SCATTER", "REDUCE_SCATTER_BLOCK", "BARRIER")
#: Scalar types of the AttributeProto oneof, in field-number order (value at 2i+3, list at
#: 2i+4, list message "<Name>List" with one repeated ``values`` field).
ATTR_TYPES = ("double", "float", "int32", "int64", "uint32", "uint64", "sint32", "sint64",
              "fixed32", "fixed64", "sfixed32", "sfixed64", "bool", "string", "bytes")
#: Node fields: (name, number, type, label); type is a scalar name or ``.Message``/``enum``.
NODE_FIELDS = (("id", 1, "uint64", "optional"), ("name", 2, "string", "optional"),
               ("type", 3, ".NodeType", "optional"), ("ctrl_deps", 4, "uint64", "repeated"),
               ("data_deps", 5, "uint64", "repeated"),
               ("start_time_micros", 6, "uint64", "optional"),
               ("duration_micros", 7, "uint64", "optional"), ("inputs", 8, ".IOInfo", "optional"),
               ("outputs", 9, ".IOInfo", "optional"),
               ("attr", 10, ".AttributeProto", "repeated"))
IOINFO_FIELDS = (("values", 1, "string", "optional"), ("shapes", 2, "string", "optional"),
                 ("types", 3, "string", "optional"))
METADATA_FIELDS = (("version", 1, "string", "optional"),
                   ("attr", 2, ".AttributeProto", "repeated"))
TENSOR_FIELDS = (("tensor_id", 1, "uint64", "optional"), ("storage_id", 2, "uint64", "optional"),
                 ("offset", 3, "uint64", "optional"), ("num_elem", 4, "uint64", "optional"),
                 ("elem_bytes", 5, "uint64", "optional"), ("device", 6, "string", "optional"))
#: Largest message accepted when reading (our bound: far above any real node).
MAX_MESSAGE = 64 << 20


def list_name(scalar: str) -> str:
    return scalar[0].upper() + scalar[1:] + "List"


def attribute_fields() -> tuple[tuple[str, int, str, str], ...]:
    fields = [("name", 1, "string", "optional"), ("doc_string", 2, "string", "optional")]
    for i, t in enumerate(ATTR_TYPES):
        fields += [(f"{t}_val", 2 * i + 3, t, "optional"),
                   (f"{t}_list", 2 * i + 4, f".{list_name(t)}", "optional")]
    return tuple(fields)


def messages() -> dict[str, tuple[tuple[str, int, str, str], ...]]:
    """Every message of the schema with its fields (the table ``et_def.proto`` restates)."""
    out = {"AttributeProto": attribute_fields()}
    out |= {list_name(t): (("values", 1, t, "repeated"),) for t in ATTR_TYPES}
    out |= {"GlobalMetadata": METADATA_FIELDS, "Node": NODE_FIELDS, "IOInfo": IOINFO_FIELDS,
            "Tensor": TENSOR_FIELDS}
    return out


@cache
def classes() -> dict[str, Any]:
    """Message classes by name, from a descriptor pool of their own (built once)."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    fdp = descriptor_pb2.FileDescriptorProto(name="libra_des/chakra/et_def.proto",
                                             package=PACKAGE, syntax="proto3")
    enums = {"NodeType": NODE_TYPES, "CollectiveCommType": COLLECTIVE_TYPES}
    for name, values in enums.items():
        enum = fdp.enum_type.add(name=name)
        for number, value in enumerate(values):
            enum.value.add(name=value, number=number)
    fd = descriptor_pb2.FieldDescriptorProto
    for name, fields in messages().items():
        msg = fdp.message_type.add(name=name)
        if name == "AttributeProto":
            msg.oneof_decl.add(name="value")
        for fname, number, ftype, label in fields:
            field = msg.field.add(name=fname, number=number, json_name=camel(fname))
            field.label = fd.LABEL_REPEATED if label == "repeated" else fd.LABEL_OPTIONAL
            if ftype.startswith("."):
                field.type_name = f".{PACKAGE}{ftype}"
                field.type = fd.TYPE_ENUM if ftype[1:] in enums else fd.TYPE_MESSAGE
            else:
                field.type = getattr(fd, f"TYPE_{ftype.upper()}")
            if name == "AttributeProto" and number >= 3:
                field.oneof_index = 0
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return {name: message_factory.GetMessageClass(pool.FindMessageTypeByName(
        f"{PACKAGE}.{name}")) for name in messages()}


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.title() for p in rest)


def varint(value: int) -> bytes:
    out = bytearray()
    while True:
        bits = value & 0x7F
        value >>= 7
        out.append(bits | (0x80 if value else 0))
        if not value:
            return bytes(out)


def frames(data: bytes, where: str) -> Iterator[bytes]:
    """The length-prefixed messages of a file's bytes."""
    pos = 0
    while pos < len(data):
        size, shift = 0, 0
        while True:
            if pos >= len(data) or shift > 63:
                raise InputError("ET", f"{where} (byte {pos})", "a Chakra trace (varint-"
                                 "prefixed protobuf messages); the file ends inside a length")
            byte = data[pos]
            pos += 1
            size |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        if size > MAX_MESSAGE or pos + size > len(data):
            raise InputError("ET", f"{where} (a message of {size} bytes at byte {pos})",
                             "a Chakra trace whose messages lie inside the file")
        yield data[pos:pos + size]
        pos += size


def read_trace(path: Path) -> tuple[Any, list[Any]]:
    """(GlobalMetadata, [Node, ...]) of one Chakra ``.et`` file."""
    from google.protobuf.message import DecodeError

    where = str(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError("ET", where, f"a readable Chakra trace ({type(exc).__name__})") from None
    cls = classes()
    parts = list(frames(data, where))
    if not parts:
        raise InputError("ET", where, "a Chakra trace with a GlobalMetadata message")
    try:
        meta = cls["GlobalMetadata"].FromString(parts[0])
        nodes = [cls["Node"].FromString(p) for p in parts[1:]]
    except DecodeError:
        raise InputError("ET", where, "a Chakra trace (protobuf messages of et_def.proto)"
                         ) from None
    return meta, nodes


def encode_trace(meta: Any, nodes: list[Any]) -> bytes:
    """The file's bytes (GlobalMetadata then Nodes, each varint-length-prefixed)."""
    out = bytearray()
    for msg in (meta, *nodes):
        body = msg.SerializeToString(deterministic=True)
        out += varint(len(body)) + body
    return bytes(out)


def attr_value(attr: Any) -> Any:
    """The value an AttributeProto holds (its oneof), or None."""
    which = attr.WhichOneof("value")
    if which is None:
        return None
    value = getattr(attr, which)
    return list(value.values) if which.endswith("_list") else value


def attrs(node: Any) -> dict[str, Any]:
    return {a.name: attr_value(a) for a in node.attr}
