"""tf.train.Example messages without TensorFlow: the feature conventions (presets),
encoding them (ExampleBuilder), and finding image and label in a record read (Layout).

The messages are TensorFlow's own (tensorflow/core/example/{feature,example}.proto), in
a private descriptor pool so that importing TensorFlow too never collides with them:

    syntax = "proto3";
    package tensorflow;
    message BytesList { repeated bytes value = 1; }
    message FloatList { repeated float value = 1 [packed = true]; }
    message Int64List { repeated int64 value = 1 [packed = true]; }
    message Feature { oneof kind { BytesList bytes_list = 1; FloatList float_list = 2;
                                   Int64List int64_list = 3; } }
    message Features { map<string, Feature> feature = 1; }
    message Example { Features features = 1; }

On the wire an Example is field 1 (Features), whose map entries are field 1 each: key
(field 1) and value (field 2, Feature), each a tag byte, a varint length and its bytes.
ExampleBuilder writes this itself (no protobuf in the writers) in the order of
protobuf's deterministic serialization, so the bytes never depend on the protobuf
installed. Reading parses with protobuf (example_class). _FILE_DESCRIPTOR is the
serialized FileDescriptorProto of the text above (a test rebuilds it).
"""

from dataclasses import dataclass
from typing import Optional

from ..errors import CorruptData, FormatError, MissingDependency, WrongFormat
from ..limits import check_num_classes, printable

_FILE_DESCRIPTOR = (
    b'\n\x17mnistconv/example.proto\x12\ntensorflow"\x1a\n\tBytesList\x12\r\n\x05value'
    b'\x18\x01 \x03(\x0c"\x1e\n\tFloatList\x12\x11\n\x05value\x18\x01 \x03(\x02B\x02\x10'
    b'\x01"\x1e\n\tInt64List\x12\x11\n\x05value\x18\x01 \x03(\x03B\x02\x10\x01"\x98\x01'
    b'\n\x07Feature\x12+\n\nbytes_list\x18\x01 \x01(\x0b2\x15.tensorflow.BytesListH\x00'
    b'\x12+\n\nfloat_list\x18\x02 \x01(\x0b2\x15.tensorflow.FloatListH\x00\x12+\n\n'
    b'int64_list\x18\x03 \x01(\x0b2\x15.tensorflow.Int64ListH\x00B\x06\n\x04kind"\x83'
    b'\x01\n\x08Features\x122\n\x07feature\x18\x01 \x03(\x0b2!.tensorflow.Features.'
    b'FeatureEntry\x1aC\n\x0cFeatureEntry\x12\x0b\n\x03key\x18\x01 \x01(\t\x12"\n\x05'
    b'value\x18\x02 \x01(\x0b2\x13.tensorflow.Feature:\x028\x01"1\n\x07Example\x12&\n'
    b'\x08features\x18\x01 \x01(\x0b2\x14.tensorflow.Featuresb\x06proto3'
)

_CLASSES = None


def example_class():
    """The Example message class (protobuf imported on first use)."""
    global _CLASSES
    if _CLASSES is None:
        try:
            from google.protobuf import descriptor_pool, message_factory
        except ImportError:
            raise MissingDependency("protobuf", "tfrecord", "TFRecord Example records") \
                from None
        pool = descriptor_pool.DescriptorPool()
        pool.AddSerializedFile(_FILE_DESCRIPTOR)
        _CLASSES = message_factory.GetMessageClass(
            pool.FindMessageTypeByName("tensorflow.Example"))
    return _CLASSES


@dataclass(frozen=True)
class Schema:
    """Feature names and defaults of one convention."""
    name: str
    image_key: str
    label_key: str
    image_format: str  # default: jpeg | png | raw
    label_format: str  # default: onehot (int64 list over the classes) | index (one int64)
    index_key: str  # the original index, with --with-index
    format_key: Optional[str] = None  # bytes feature naming the image encoding
    height_key: Optional[str] = None
    width_key: Optional[str] = None


PRESETS = {
    # The users' data-prep recipe: cv2 JPEG under "image", one-hot int64 "label".
    "recipe": Schema("recipe", "image", "label", "jpeg", "onehot", "index"),
    # TensorFlow Datasets' mnist: PNG "image", scalar int64 "label".
    "tfds": Schema("tfds", "image", "label", "png", "index", "index"),
    # TF-slim's dataset_utils.image_to_tfexample (download_and_convert_mnist.py).
    "slim": Schema("slim", "image/encoded", "image/class/label", "png", "index",
                   "image/index", "image/format", "image/height", "image/width"),
}

# Raw pixels carry no shape, so presets without height/width features get these.
RAW_HEIGHT_KEY, RAW_WIDTH_KEY = "height", "width"
# The class name of a record's label: only when the input names its classes.
LABEL_NAME_KEY = "label_name"


def own_keys(*conventions):
    """Feature names that are never extra fields: Schemas' or Layouts' own, and ours."""
    keys = [k for c in conventions for k in (c.image_key, c.label_key, c.index_key,
                                             c.format_key, c.height_key, c.width_key)]
    return tuple(dict.fromkeys(k for k in keys + [RAW_HEIGHT_KEY, RAW_WIDTH_KEY,
                                                  LABEL_NAME_KEY] if k))


def _varint(n: int) -> bytes:
    """A base-128 varint, as protobuf writes an int64 (negatives as 10 bytes)."""
    if 0 <= n < 0x80:
        return _BYTE[n]
    if 0 <= n < 0x4000:  # image lengths: the common case, without a loop
        return bytes((n & 0x7F | 0x80, n >> 7))
    n &= 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_BYTE = [bytes((i,)) for i in range(0x80)]


def _field(payload: bytes) -> bytes:
    """Field 1, length-delimited (every field of these messages but Feature's kinds)."""
    return b"\x0a" + _varint(len(payload)) + payload


def _bytes_feature(values) -> bytes:
    """A serialized Feature holding a BytesList (Feature field 1)."""
    return _field(b"".join(map(_field, values)))


def _int64_feature(packed: bytes) -> bytes:
    """A serialized Feature holding an Int64List (field 3) of packed varints (none: no field)."""
    return b"\x1a" + _field(_field(packed) if packed else b"")[1:]


def _order(key: bytes) -> bytes:
    """Sorts keys as upb does: by bytes, a key after the longer keys it prefixes."""
    return key + b"\xff"


def _entry(key: str, feature: bytes) -> bytes:
    """A Features map entry: key (field 1) and value (field 2), as a field 1."""
    key = _field(key.encode("utf-8"))
    return _field(key + b"\x12" + _varint(len(feature)) + feature)


class ExampleBuilder:
    """Serializes Examples as protobuf's deterministic serialization does, without its
    import (benchmarks/README.md). A class's own features are serialized when it is first
    seen, in a bounded cache (one-hot labels of all up front: num_classes squared)."""

    # int64 values the cached entries may hold in all.
    CACHE_VALUES = 1 << 21

    # Per-record int64 features (QMNIST's extra columns): serialize() only; set by of().
    extra_names: tuple = ()

    def __init__(self, schema: Schema, image_format: str, label_format: str,
                 num_classes: int, shape, with_index: bool, class_names=()):
        self.height, self.width = shape[:2]  # (H x W x 3 for RGB PNGs)
        self.height_key, self.width_key = schema.height_key, schema.width_key
        if image_format == "raw" and self.height_key is None:
            self.height_key, self.width_key = RAW_HEIGHT_KEY, RAW_WIDTH_KEY
        self.schema, self.image_format, self.label_format = schema, image_format, \
            label_format
        self.num_classes = num_classes
        self.with_index = with_index
        self.class_names = tuple(class_names)
        self.image_key = _field(schema.image_key.encode("utf-8"))
        width = num_classes if label_format == "onehot" else 1
        self.cache_size = max(16, self.CACHE_VALUES // (width + 8))
        self.cache = {}  # label -> the entries around the image's (and the index's)
        self.image_heads, self.index_prefixes = {}, {}
        self._slots: Optional[list] = None
        self.index_first = _order(schema.index_key.encode()) < \
            _order(schema.image_key.encode())

    @classmethod
    def of(cls, settings) -> "ExampleBuilder":
        """The builder of a settings object holding these arguments and extra_names."""
        builder = cls(settings.schema, settings.image_format, settings.label_format,
                      settings.num_classes, settings.shape, settings.with_index,
                      settings.class_names)
        builder.extra_names = tuple(settings.extra_names)
        return builder

    def _template(self, label):
        """A class's serialized map entries, cut where the per-record ones go (_cut)."""
        hit = self.cache.get(label)
        if hit is not None:
            return hit
        if not 0 <= label < self.num_classes:
            raise ValueError(f"label {label} is not in 0..{self.num_classes - 1}")
        schema = self.schema
        if self.label_format == "onehot":
            onehot = bytearray(self.num_classes)
            onehot[label] = 1
            label_feature = _int64_feature(bytes(onehot))  # 0 and 1: one byte each
        else:
            label_feature = _int64_feature(_varint(label))
        entries = {schema.label_key: label_feature}
        if schema.format_key:
            entries[schema.format_key] = _bytes_feature([self.image_format.encode()])
        if self.class_names:  # the class's name, UTF-8, where the input names classes
            name = self.class_names[label] if label < len(self.class_names) else ""
            entries[LABEL_NAME_KEY] = _bytes_feature([name.encode("utf-8")])
        if self.height_key:
            entries[self.height_key] = _int64_feature(_varint(self.height))
            entries[self.width_key] = _int64_feature(_varint(self.width))
        if len(self.cache) >= self.cache_size:
            self.cache.clear()
        hit = self.cache[label] = self._cut(entries)
        return hit

    def _cut(self, entries):
        """The entries serialized in upb's order, cut where the per-record entries go."""
        slots = {self.schema.image_key.encode("utf-8")}
        if self.with_index:
            slots.add(self.schema.index_key.encode("utf-8"))
        slots.update(name.encode("utf-8") for name in self.extra_names)
        parts, part = [], []
        for key in sorted([k.encode("utf-8") for k in entries] + list(slots), key=_order):
            if key in slots:
                parts.append(b"".join(part))
                part = []
            else:
                part.append(_entry(key.decode("utf-8"), entries[key.decode("utf-8")]))
        return tuple(parts) + (b"".join(part),)

    def warm(self, classes=256):
        """Serialize the first classes' entries now (forked workers then inherit them)."""
        for label in range(min(self.num_classes, self.cache_size, classes)):
            self._template(label)

    def _index_entry(self, index):
        """The serialized map entry of an index (its prefix is cached per varint size)."""
        value = _varint(index)
        prefix = self.index_prefixes.get(len(value))
        if prefix is None:
            entry = _entry(self.schema.index_key, _int64_feature(value))
            prefix = self.index_prefixes[len(value)] = entry[:-len(value)]
        return prefix + value

    def _image_head(self, length):
        """The image's map entry up to the image of `length` bytes (cached per length)."""
        head = self.image_heads.get(length)
        if head is None:
            image_list = 1 + len(_varint(length)) + length  # BytesList{value: image}
            feature = 1 + len(_varint(image_list)) + image_list  # Feature{bytes_list}
            head = self.image_key + b"\x12" + _varint(feature) + b"\x0a" + \
                _varint(image_list) + b"\x0a" + _varint(length)
            head = b"\x0a" + _varint(len(head) + length) + head
            if len(self.image_heads) >= 65536:
                self.image_heads.clear()
            self.image_heads[length] = head
        return head

    def split_at_image(self, label: int, length: int, index: int = 0):
        """(before, after) such that serialize(label, image, index) == before + image +
        after for every image of `length` bytes."""
        parts = self._template(label)
        if self.with_index:
            entry = self._index_entry(index)
            if self.index_first:
                parts = (parts[0] + entry + parts[1], parts[2])
            else:
                parts = (parts[0], parts[1] + entry + parts[2])
        before, after = parts
        head = self._image_head(length)
        features = len(before) + len(head) + length + len(after)
        return b"\x0a" + _varint(features) + before + head, after

    def serialize(self, label: int, image: bytes, index: int, extras=()) -> bytes:
        """One Example's deterministic serialization; extras: values of extra_names."""
        if not self.extra_names:
            head, tail = self.split_at_image(label, len(image), index)
            return head + image + tail
        if self._slots is None:  # the per-record entries' keys, in the map's order
            keys = [self.schema.image_key] + ([self.schema.index_key] if self.with_index
                                              else []) + list(self.extra_names)
            self._slots = sorted(keys, key=lambda k: _order(k.encode("utf-8")))
        values = dict(zip(self.extra_names, extras))
        parts = self._template(label)
        out = [parts[0]]
        for key, part in zip(self._slots, parts[1:]):
            if key == self.schema.image_key:
                out.append(self._image_head(len(image)) + image)
            elif key in values:
                out.append(_entry(key, _int64_feature(_varint(values[key]))))
            else:
                out.append(self._index_entry(index))
            out.append(part)
        body = b"".join(out)
        return b"\x0a" + _varint(len(body)) + body


@dataclass(frozen=True)
class Layout:
    """Where image, label and optional features are, which every record must have."""
    image_key: str
    label_key: str
    label_width: int  # one value is a class index, several a one-hot row
    index_key: Optional[str]
    format_key: Optional[str]
    height_key: Optional[str]
    width_key: Optional[str]

    @property
    def label_format(self) -> str:
        """onehot or index, by the label's width."""
        return "onehot" if self.label_width > 1 else "index"


def parse_example(Example, path, number, data):
    """Record `number`'s bytes as an Example, else WrongFormat naming the record."""
    try:
        return Example.FromString(data)
    except Exception as e:  # protobuf's DecodeError, whatever the backend
        raise WrongFormat(path, f"record {number} (counting from 0): not a "
                                f"tf.train.Example ({e})") from None


def record_name(number):
    """How messages name a record."""
    return f"record {number} (counting from 0)"


def _feature_names(feature):
    """The feature names of a record as one line can show them (names are data)."""
    names = sorted(feature)
    shown = ", ".join(printable(n, 40) for n in names[:20])
    return (shown + (f", ... ({len(names)} in all)" if len(names) > 20 else "")) or "none"


def feature_values(path, number, feature, key, kind):
    """The values of feature `key`, which must be there and hold `kind`, else CorruptData."""
    if key not in feature:
        raise CorruptData(path, f"{record_name(number)}: no {printable(key)} feature, "
                                "which the first record has")
    actual = feature[key].WhichOneof("kind")
    if actual != kind:
        raise CorruptData(path, f"{record_name(number)}: feature {printable(key)} is "
                                f"{actual or 'empty'}, expected {kind}")
    return getattr(feature[key], kind).value


def one_value(path, number, feature, key, kind):
    """The single value of feature `key` (see feature_values), else a FormatError."""
    values = feature_values(path, number, feature, key, kind)
    if len(values) != 1:
        raise CorruptData(path, f"{record_name(number)}: feature {printable(key)} has "
                                f"{len(values)} values, expected one")
    return values[0]


def find_layout(example, schema, path, number) -> Layout:
    """The Layout of records like `example`, from the schema named, or detected."""
    feature = example.features.feature
    if schema in (None, "auto"):
        preset = PRESETS["slim"] if "image/encoded" in feature else PRESETS["recipe"]
        if preset.label_key not in feature or preset.image_key not in feature:
            raise FormatError(path, f"no image/label features this reader knows "
                                    f"(features: {_feature_names(feature)})",
                              "the conventions read are recipe, tfds and slim")
    else:
        preset = PRESETS[schema]
        for key in (preset.image_key, preset.label_key):
            if key not in feature:
                raise FormatError(path, f"no '{key}' feature, which the {schema} "
                                        f"convention has (features: "
                                        f"{_feature_names(feature)})",
                                  "pass another schema= (recipe, tfds or slim)",
                                  cli_hint="name its convention with --schema (recipe, tfds or slim)")
    # One value is a class index, several a one-hot row, whatever the convention.
    width = len(feature_values(path, number, feature, preset.label_key, "int64_list"))
    if width > 1:
        check_num_classes(width, path, f"{record_name(number)}: one-hot labels")
    height_key, width_key = preset.height_key, preset.width_key
    if height_key is None and RAW_HEIGHT_KEY in feature:
        height_key, width_key = RAW_HEIGHT_KEY, RAW_WIDTH_KEY
    if height_key is not None:
        present = [key in feature for key in (height_key, width_key)]
        if present == [False, False]:
            height_key = width_key = None
        elif present != [True, True]:
            have, lack = (height_key, width_key) if present[0] else (width_key, height_key)
            raise CorruptData(path, f"{record_name(number)}: has a {printable(have)} "
                                    f"feature but no {printable(lack)}")
    index_key = preset.index_key if preset.index_key in feature else None
    format_key = preset.format_key if preset.format_key and preset.format_key in feature \
        else None
    return Layout(preset.image_key, preset.label_key, width, index_key, format_key,
                  height_key, width_key)
