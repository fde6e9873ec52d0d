"""ExampleBuilder writes tf.train.Example's wire format itself (no protobuf in the
writer): every preset, image and label format, class names, the index, and image and
label sizes on both sides of each varint width must give exactly protobuf's
deterministic serialization of the same Example, built field by field."""

import itertools
import random

import pytest

pytest.importorskip("google.protobuf")

from mnistconv.codecs.example import (  # noqa: E402
    LABEL_NAME_KEY, PRESETS, ExampleBuilder, example_class)

# Image lengths at every varint boundary of the nested lengths (1, 2 and 3 bytes).
LENGTHS = (0, 1, 9, 120, 127, 128, 129, 16360, 16383, 16384, 16400)


def protobuf_bytes(builder, label, image, index):
    ex = example_class()()
    f = ex.features.feature
    schema = builder.schema
    f[schema.image_key].bytes_list.value.append(image)
    if builder.label_format == "onehot":
        onehot = [0] * builder.num_classes
        onehot[label] = 1
        f[schema.label_key].int64_list.value.extend(onehot)
    else:
        f[schema.label_key].int64_list.value.append(label)
    if schema.format_key:
        f[schema.format_key].bytes_list.value.append(builder.image_format.encode())
    if builder.class_names:
        name = builder.class_names[label] if label < len(builder.class_names) else ""
        f[LABEL_NAME_KEY].bytes_list.value.append(name.encode())
    if builder.height_key:
        f[builder.height_key].int64_list.value.append(builder.height)
        f[builder.width_key].int64_list.value.append(builder.width)
    if builder.with_index:
        f[schema.index_key].int64_list.value.append(index)
    return ex.SerializeToString(deterministic=True)


@pytest.mark.parametrize("preset,image_format,label_format,with_index", list(
    itertools.product(PRESETS, ["jpeg", "png", "raw"], ["onehot", "index"],
                      [False, True])))
def test_serialization_is_protobufs(preset, image_format, label_format, with_index):
    rng = random.Random(7)
    # 70000 one-hot classes: a label entry whose length takes a 3-byte varint.
    for classes, names, shape, lengths in [(10, (), (28, 28), LENGTHS),
                                           (200, ("zero", "één"), (300, 5), LENGTHS),
                                           (70000, (), (28, 28), (0, 200))]:
        builder = ExampleBuilder(PRESETS[preset], image_format, label_format, classes,
                                 shape, with_index, names)
        for label, length in itertools.product({0, 1, classes - 1}, lengths):
            image = bytes(rng.randrange(256) for _ in range(length))
            index = rng.choice([0, 127, 128, 59999, 2 ** 40])
            assert builder.serialize(label, image, index) == \
                protobuf_bytes(builder, label, image, index), (classes, label, length)
            before, after = builder.split_at_image(label, length)
            assert before + image + after == protobuf_bytes(builder, label, image, 0)


def test_map_order_puts_a_key_before_its_prefixes():
    """upb's deterministic order (protobuf 6.33 and 7.36): "label_name" before
    "label", which a plain sort by key would not give."""
    builder = ExampleBuilder(PRESETS["recipe"], "jpeg", "onehot", 2, (28, 28), False,
                             ("cat", "dog"))
    record = builder.serialize(1, b"JPEG", 0)
    assert record.index(b"\x05image") < record.index(b"\nlabel_name") < \
        record.index(b"\x05label\x12")
    assert record == protobuf_bytes(builder, 1, b"JPEG", 0)


def test_label_outside_the_classes_is_refused():
    builder = ExampleBuilder(PRESETS["tfds"], "png", "index", 10, (28, 28), False)
    with pytest.raises(ValueError, match=r"^label 10 is not in 0\.\.9$"):
        builder.serialize(10, b"", 0)
