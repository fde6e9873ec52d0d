"""caffe.Datum on the wire, encoded and decoded here (no protobuf runtime, no caffe_pb2).
Caffe's src/caffe/proto/caffe.proto declares (proto2):

    message Datum {
      optional int32 channels = 1;  optional int32 height = 2;  optional int32 width = 3;
      optional bytes data = 4;      optional int32 label = 5;   repeated float float_data = 6;
      optional bool encoded = 7 [default = false];  // data is an image file's bytes
    }

Each field is a key varint (field_number << 3 | wire type) then its value: varints
(a negative int32 in ten bytes), a varint length then bytes, or fixed32 floats (packed:
one length-delimited run). A parser keeps a repeated scalar's last value and skips
unknown fields. Written byte for byte as convert_mnist_data (channels, height, width,
data, label) and convert_imageset --encoded (data, label, encoded) write them.
"""

CHANNELS, HEIGHT, WIDTH, DATA, LABEL, FLOAT_DATA, ENCODED = 1, 2, 3, 4, 5, 6, 7
VARINT, FIXED64, BYTES, FIXED32 = 0, 1, 2, 5
# The wire type each field of Datum is written with (float_data also packed, BYTES).
WIRE_TYPES = {CHANNELS: VARINT, HEIGHT: VARINT, WIDTH: VARINT, DATA: BYTES, LABEL: VARINT,
              FLOAT_DATA: FIXED32, ENCODED: VARINT}
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1


class NotADatum(ValueError):
    """The bytes are not a caffe.Datum (the reader names the record)."""


def varint(value: int) -> bytes:
    """A protobuf varint (a negative int32 in ten bytes): varint(300) == b'\\xac\\x02'."""
    value &= (1 << 64) - 1
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def key(field: int, wire_type: int) -> bytes:
    """The key that starts a field."""
    return varint(field << 3 | wire_type)


def raw_prefix(channels, height, width) -> bytes:
    """A raw Datum up to its pixels: channels, height, width, data's key and length."""
    return (key(CHANNELS, VARINT) + varint(channels) + key(HEIGHT, VARINT) +
            varint(height) + key(WIDTH, VARINT) + varint(width) + key(DATA, BYTES) +
            varint(channels * height * width))


def label_field(label: int) -> bytes:
    """The label field, written even for 0 as convert_mnist_data does (b'\\x28\\x00')."""
    return key(LABEL, VARINT) + varint(label)


def encoded_datum(image_bytes: bytes, label: int) -> bytes:
    """A Datum as convert_imageset --encoded writes it: data, label, encoded = true."""
    return (key(DATA, BYTES) + varint(len(image_bytes)) + image_bytes + label_field(label)
            + key(ENCODED, VARINT) + b"\x01")


def _read_varint(buf, at):
    result = shift = 0
    while True:
        if at >= len(buf):
            raise NotADatum("a varint runs past the end")
        byte = buf[at]
        at += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, at
        shift += 7
        if shift >= 70:
            raise NotADatum("a varint is longer than ten bytes")


_NAMES = {CHANNELS: "channels", HEIGHT: "height", WIDTH: "width", LABEL: "label"}


def parse(buf: bytes) -> dict:
    """The fields of one Datum, proto2's defaults when absent (data: (start, end) in buf;
    float_data: how many floats), or NotADatum for what a protobuf parser would refuse."""
    fields: dict = {"channels": 0, "height": 0, "width": 0, "label": 0, "encoded": False,
                    "data": (0, 0), "float_data": 0}
    at, end = 0, len(buf)
    while at < end:
        tag, at = _read_varint(buf, at)
        field, wire = tag >> 3, tag & 7
        if field == 0:
            raise NotADatum("field number 0")
        if field in WIRE_TYPES and wire != WIRE_TYPES[field] and \
                not (field == FLOAT_DATA and wire == BYTES):
            raise NotADatum(f"field {field} has wire type {wire}, caffe.proto says "
                            f"{WIRE_TYPES[field]}")
        if wire == VARINT:
            value, at = _read_varint(buf, at)
            if field == ENCODED:
                fields["encoded"] = value != 0
            elif field in _NAMES:
                value &= (1 << 64) - 1  # an int32 is sign-extended to 64 bits
                value -= (1 << 64) if value >= 1 << 63 else 0
                if not INT32_MIN <= value <= INT32_MAX:
                    raise NotADatum(f"{_NAMES[field]} {value} does not fit int32")
                fields[_NAMES[field]] = value
        elif wire == BYTES:
            length, at = _read_varint(buf, at)
            if length > end - at:
                raise NotADatum(f"field {field} claims {length} bytes, {end - at} remain")
            if field == DATA:
                fields["data"] = (at, at + length)
            elif field == FLOAT_DATA:
                fields["float_data"] += length // 4
            at += length
        elif wire in (FIXED32, FIXED64):
            at += 4 if wire == FIXED32 else 8
            if at > end:
                raise NotADatum(f"field {field} runs past the end")
            if field == FLOAT_DATA:
                fields["float_data"] += 1
        else:
            raise NotADatum(f"wire type {wire} at byte {at - 1}, which Datum does not use")
    return fields
