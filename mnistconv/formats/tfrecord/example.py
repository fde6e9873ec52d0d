"""tf.train.Example messages without TensorFlow: the feature conventions (presets),
encoding them fast (ExampleBuilder), and finding image and label in a record read back
(Layout).

The messages are TensorFlow's own (tensorflow/core/example/{feature,example}.proto),
declared here in a private descriptor pool so that importing TensorFlow in the same
process (the tests do) never collides with them:

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
(field 1, string) and value (field 2, Feature). Map entries have no defined order, so
every serialization here passes deterministic=True, which sorts them by key: the same
input always gives the same bytes.

_FILE_DESCRIPTOR below is the serialized FileDescriptorProto of the text above; a test
rebuilds it with descriptor_pb2 and checks the messages against tf.train's.
"""

from dataclasses import dataclass
from typing import Optional

from ...errors import FormatError, MissingDependency
from ...limits import check_num_classes, printable

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
    # TF-slim's dataset_utils.image_to_tfexample, as its download_and_convert_mnist.py
    # writes MNIST: PNG, image/format b"png".
    "slim": Schema("slim", "image/encoded", "image/class/label", "png", "index",
                   "image/index", "image/format", "image/height", "image/width"),
}

# Stands in for an image while finding where images go in a serialization: 16 bytes
# that all carry a varint's continuation bit, so no tag, length or int64 of the rest
# of an Example can contain them (a varint has at most 10 bytes); split_at_image still
# checks that the placeholder is found exactly once.
_PLACEHOLDER = bytes(range(0xF0, 0x100))

# Raw pixels carry no shape, so presets without height/width features get these.
RAW_HEIGHT_KEY, RAW_WIDTH_KEY = "height", "width"
# The class name of a record's label (bytes, UTF-8): written only when the input names
# its classes, so records of unnamed classes keep their bytes.
LABEL_NAME_KEY = "label_name"


class ExampleBuilder:
    """Serializes Examples of one schema fast: a template message per class holds the
    features that depend only on the class (label, format, height, width); per record
    only the image bytes (and the index) are set before a deterministic serialization.

    Templates are built when a class is first seen and kept in a bounded cache: a
    one-hot template holds num_classes values, so one per class up front would be
    num_classes squared (4 GB at 65536 classes)."""

    # int64 values the cached templates may hold in all (each costs ~8 bytes and more).
    CACHE_VALUES = 1 << 21

    def __init__(self, schema: Schema, image_format: str, label_format: str,
                 num_classes: int, shape, with_index: bool, class_names=()):
        self.Example = example_class()
        self.height, self.width = shape
        self.height_key, self.width_key = schema.height_key, schema.width_key
        if image_format == "raw" and self.height_key is None:
            self.height_key, self.width_key = RAW_HEIGHT_KEY, RAW_WIDTH_KEY
        self.schema, self.image_format, self.label_format = schema, image_format, \
            label_format
        self.num_classes = num_classes
        self.with_index = with_index
        self.class_names = tuple(class_names)
        width = num_classes if label_format == "onehot" else 1
        self.cache_size = max(16, self.CACHE_VALUES // (width + 8))
        self.cache = {}  # label -> (template, image values, index values)

    def _template(self, label):
        hit = self.cache.get(label)
        if hit is not None:
            return hit
        if not 0 <= label < self.num_classes:
            raise ValueError(f"label {label} is not in 0..{self.num_classes - 1}")
        schema = self.schema
        example = self.Example()
        feature = example.features.feature
        feature[schema.image_key].bytes_list.value.append(b"")
        if self.label_format == "onehot":
            onehot = [0] * self.num_classes
            onehot[label] = 1
            feature[schema.label_key].int64_list.value.extend(onehot)
        else:
            feature[schema.label_key].int64_list.value.append(label)
        if schema.format_key:
            feature[schema.format_key].bytes_list.value.append(self.image_format.encode())
        if self.class_names:  # the class's name, UTF-8, where the input names classes
            name = self.class_names[label] if label < len(self.class_names) else ""
            feature[LABEL_NAME_KEY].bytes_list.value.append(name.encode("utf-8"))
        if self.height_key:
            feature[self.height_key].int64_list.value.append(self.height)
            feature[self.width_key].int64_list.value.append(self.width)
        index_values = None
        if self.with_index:
            feature[schema.index_key].int64_list.value.append(0)
            index_values = feature[schema.index_key].int64_list.value
        if len(self.cache) >= self.cache_size:
            self.cache.clear()
        hit = self.cache[label] = (example, feature[schema.image_key].bytes_list.value,
                                   index_values)
        return hit

    def warm(self, classes=256):
        """Build the first classes' templates now (forked workers then inherit them)."""
        for label in range(min(self.num_classes, self.cache_size, classes)):
            self._template(label)

    def split_at_image(self, label: int, length: int):
        """(before, after) such that serialize(label, image, 0) == before + image + after
        for every image of `length` bytes. The protobuf library decides: the image is
        found in a serialization with a placeholder image in its place (a bytes field is
        stored verbatim). Called once per (class, image length): thousands of times."""
        template, values, _ = self._template(label)
        placeholder = (_PLACEHOLDER * (length // len(_PLACEHOLDER) + 1))[:length]
        values[0] = placeholder
        data = template.SerializeToString(deterministic=True)
        start = data.find(placeholder) if length >= 8 else -1
        if start < 0 or data.find(placeholder, start + 1) >= 0:
            # Too short to be unique: two serializations whose images differ in every
            # byte differ exactly where the image lies.
            values[0] = bytes(255 - b for b in placeholder)
            other = template.SerializeToString(deterministic=True)
            start = next(i for i, (a, b) in enumerate(zip(data, other)) if a != b) \
                if length else len(data)
            if data[start + length:] != other[start + length:]:
                raise AssertionError("image bytes are not contiguous in the serialization")
        return data[:start], data[start + length:]

    def serialize(self, label: int, image: bytes, index: int) -> bytes:
        """The deterministic serialization of one Example."""
        template, values, index_values = self._template(label)
        values[0] = image
        if self.with_index:
            index_values[0] = index
        return template.SerializeToString(deterministic=True)


# --- reading back ----------------------------------------------------------------

class Layout:
    """How to find image and label in an Example (from a preset or the first record).
    A feature the first record has (height, width, format, index) every record must
    have, with the same kind."""

    def __init__(self, image_key, label_key, label_format, label_width, index_key,
                 format_key, height_key, width_key):
        self.image_key, self.label_key, self.label_format = image_key, label_key, \
            label_format
        self.label_width = label_width
        self.index_key, self.format_key = index_key, format_key
        self.height_key, self.width_key = height_key, width_key


def record_name(number):
    """How messages name a record."""
    return f"record {number} (counting from 0)"


def _feature_names(feature):
    """The feature names of a record as one line can show them (names are data)."""
    names = sorted(feature)
    shown = ", ".join(printable(n, 40) for n in names[:20])
    return (shown + (f", ... ({len(names)} in all)" if len(names) > 20 else "")) or "none"


def feature_values(path, number, feature, key, kind):
    """The values of feature `key`, which must be there and hold `kind` (bytes_list or
    int64_list). (feature[key] alone would add an empty feature, and a mistyped one
    reads as no values.)"""
    if key not in feature:
        raise FormatError(path, f"{record_name(number)}: no {printable(key)} feature, "
                                "which the first record has")
    actual = feature[key].WhichOneof("kind")
    if actual != kind:
        raise FormatError(path, f"{record_name(number)}: feature {printable(key)} is "
                                f"{actual or 'empty'}, expected {kind}")
    return getattr(feature[key], kind).value


def one_value(path, number, feature, key, kind):
    """The single value of feature `key` (see feature_values), else a FormatError."""
    values = feature_values(path, number, feature, key, kind)
    if len(values) != 1:
        raise FormatError(path, f"{record_name(number)}: feature {printable(key)} has "
                                f"{len(values)} values, expected one")
    return values[0]


def find_layout(example, schema, path, number) -> Layout:
    """Where image, label and the optional features are in records like `example`
    (the first record): from the schema named, or (schema "auto"/None) detected."""
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
                                        f"{_feature_names(feature)})")
    # One value is a class index, several a one-hot row, whatever the convention.
    width = len(feature_values(path, number, feature, preset.label_key, "int64_list"))
    label_format = "onehot" if width > 1 else "index"
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
            raise FormatError(path, f"{record_name(number)}: has a {printable(have)} "
                                    f"feature but no {printable(lack)}")
    index_key = preset.index_key if preset.index_key in feature else None
    format_key = preset.format_key if preset.format_key and preset.format_key in feature \
        else None
    return Layout(preset.image_key, preset.label_key, label_format, width, index_key,
                  format_key, height_key, width_key)
