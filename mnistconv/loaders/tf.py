"""A tf.data input pipeline for what mnistconv writes (the `tensorflow` extra; this
module imports TensorFlow, nothing else in mnistconv does).

dataset(path) reads a TFRecord file, shard set or glob of any preset mnistconv writes,
or a TFDS directory, with tf.data's own reader, and anything else mnistconv reads (IDX,
npz, Parquet, ImageFolder, ...) through mnistconv's, and yields (image, label): image
uint8 H x W x C with the channels the images store (1 for grey, 3 for RGB: never
reduced; float32 in [0, 1] with normalize=True), label int64. For TFRecord the feature
spec and the decoder are found from the first record, read without TensorFlow.

    import mnistconv, tensorflow as tf
    train = mnistconv.tf.dataset("mnist.tfrecord", "train", normalize=True,
                                 shuffle=10000, batch_size=128)
    model = tf.keras.Sequential([tf.keras.layers.Flatten(), tf.keras.layers.Dense(10)])
    model.compile("adam", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(train, epochs=1)
"""

import os

from ..errors import BadOption, FormatError, UsageError, optional_import


# What a TFDS directory whose shards are another file format is told, by the one wanted.
_OTHER_FORMAT = {
    "tfrecord": ("which tf.data does not read",
                 "use mnistconv.grain.source(path) or tfds.data_source"),
    "array_record": ("not array_record", "use mnistconv.tf.dataset(path), or write it "
                                         "with --file-format array_record")}


# dataset()'s own keywords, listed when one is misspelt.
_OWN = ("split", "format", "batch_size", "shuffle", "seed", "normalize", "drop_remainder")


def shard_format(path) -> str:
    """The file format of a TFDS directory's shards: tfrecord, array_record, ..."""
    from ..formats.tfds.format import find_directory
    from ..formats.tfds.info import Info
    return Info(find_directory(str(path))).file_format


def split_files(path, split=None, file_format="tfrecord") -> list:
    """The files of `split` in a TFRecord (or "array_record") file, shard set or glob,
    or a TFDS directory with shards of that format (split: loading.split_name's rule)."""
    from ..formats.tfds.format import sniff as is_tfds
    from .loading import split_name
    path = str(path)
    if os.path.isdir(path) and is_tfds(path):
        from ..formats.tfds.format import find_directory
        from ..formats.tfds.info import Info
        meta = Info(find_directory(path))
        if meta.file_format != file_format:
            what, hint = _OTHER_FORMAT[file_format]
            raise UsageError(path, f"its shards are {meta.file_format}, {what}", hint)
        return meta.shard_files(split_name(meta.splits, split, path))
    if file_format == "tfrecord":
        from ..formats.tfrecord.names import resolve
    else:
        from ..formats.arrayrecord.format import resolve
    groups = resolve(path)
    return groups[split_name(groups, split, path)]


def _first_record(files):
    """(compression, Layout, image kind, (H, W, C)) from the first record."""
    from .. import codecs
    from ..codecs.example import example_class, find_layout
    from ..io.fileio import open_input
    from ..codecs.framing import detect_compression, iter_records
    with open_input(files[0]) as f:
        head = f.read(16)
    compression = detect_compression(files[0], head)
    for number, _, data in iter_records(files[0], compression):
        example = example_class().FromString(bytes(data))
        layout = find_layout(example, "auto", files[0], number)
        feature = example.features.feature
        image = feature[layout.image_key].bytes_list.value[0]
        kind = codecs.image_kind(image)
        stored = codecs.image_shape(image) if kind != "raw" else None
        if kind != "raw" and stored is None:
            stored = codecs.decode_image(image).shape  # a header too odd to read alone
        # The channels the image stores (1 for raw pixels): decoded as they are.
        channels = stored[2] if stored is not None and len(stored) == 3 else 1
        if layout.height_key:
            shape = (feature[layout.height_key].int64_list.value[0],
                     feature[layout.width_key].int64_list.value[0])
        elif stored is not None:
            shape = stored[:2]
        else:
            side = int(round(len(image) ** 0.5))
            shape = (side, side)
        return compression, layout, kind, tuple(int(d) for d in shape) + (channels,)
    raise FormatError(files[0], "contains no records",
                      "give a TFRecord file that holds at least one record")


def dataset(path, split=None, *, format=None, batch_size=None, shuffle=None, seed=None,
            normalize=False, drop_remainder=False, **read_options):
    """A tf.data.Dataset of (image, label) for anything mnistconv reads: a TFRecord file,
    shard set or glob or a TFDS directory through tf.data's own reader, any other
    format (IDX, npz, Parquet, ...; `format` names it, `read_options` as for
    mnistconv.read; a keyword neither takes is a UsageError listing the valid ones)
    through mnistconv's reader. split: the only one, else 'train' (an unknown one is a
    UsageError naming those there are). shuffle: a buffer size; normalize: float32
    pixels in [0, 1].

        ds = dataset("out/mnist", "test", batch_size=256)     # a TFDS directory
        images, labels = next(iter(ds))                        # (256, 28, 28, 1) uint8
        # RGB images: (256, H, W, 3); they are never made grey here.
    """
    tf = optional_import("tensorflow", "tensorflow", "mnistconv.tf.dataset")
    if shuffle is not None and (isinstance(shuffle, bool) or int(shuffle) < 1):
        raise BadOption(None, f"shuffle is a buffer size of 1 or more, not {shuffle!r}")
    if batch_size is not None and (isinstance(batch_size, bool) or int(batch_size) < 1):
        raise BadOption(None, f"batch_size must be 1 or more, not {batch_size!r}")
    from . import loading
    name = loading.format_name(path, format)
    if name not in (None, "tfrecord", "tfds") or read_options or \
            (name == "tfds" and shard_format(path) != "tfrecord"):
        read = loading.read("mnistconv.tf.dataset", _OWN, path, name, read_options)
        ds = _from_reader(tf, read, split, path, normalize)
        if shuffle:
            ds = ds.shuffle(int(shuffle), seed=seed, reshuffle_each_iteration=True)
        if batch_size:
            ds = ds.batch(int(batch_size), drop_remainder=drop_remainder)
        return ds.prefetch(tf.data.AUTOTUNE)
    files = split_files(path, split)
    compression, layout, kind, shape = _first_record(files)
    spec = {layout.image_key: tf.io.FixedLenFeature([], tf.string),
            layout.label_key: tf.io.FixedLenFeature(
                [layout.label_width] if layout.label_format == "onehot" else [], tf.int64)}
    height, width, channels = shape

    def decode(record):
        parsed = tf.io.parse_single_example(record, spec)
        data = parsed[layout.image_key]
        if kind == "raw":
            image = tf.reshape(tf.io.decode_raw(data, tf.uint8), [height, width, 1])
        elif kind == "jpeg":
            image = tf.io.decode_jpeg(data, channels=channels)
        else:
            # decode_png takes 1, 3 or 4; 0 ("as stored") gives grey + alpha its 2.
            image = tf.io.decode_png(data, channels=channels if channels != 2 else 0)
        image = tf.ensure_shape(image, [height, width, channels])
        if normalize:
            image = tf.cast(image, tf.float32) / 255.0
        label = parsed[layout.label_key]
        if layout.label_format == "onehot":
            label = tf.argmax(label, output_type=tf.int64)
        return image, label

    ds = tf.data.TFRecordDataset(files, compression_type={"none": "", "gzip": "GZIP",
                                                          "zlib": "ZLIB"}[compression])
    if shuffle:
        ds = ds.shuffle(int(shuffle), seed=seed, reshuffle_each_iteration=True)
    ds = ds.map(decode, num_parallel_calls=tf.data.AUTOTUNE)
    if batch_size:
        ds = ds.batch(int(batch_size), drop_remainder=drop_remainder)
    return ds.prefetch(tf.data.AUTOTUNE)


def _from_reader(tf, read, split, path, normalize):
    """(image, label) of one split of a dataset mnistconv read, a batch at a time (the
    formats tf.data has no reader for): images H x W x C as stored, labels int64."""
    from .loading import split_name
    chosen = read.splits[split_name(read.splits, split, path)]
    h = chosen.header
    shape = tuple(h.shape) if len(h.shape) == 3 else tuple(h.shape) + (1,)
    label_shape = tuple(getattr(h, "label_shape", ()) or ())

    def rows():
        import numpy as np
        for batch in chosen.batches():
            images = np.asarray(batch.images).reshape((len(batch),) + shape)
            yield images, np.asarray(batch.labels, dtype=np.int64)

    ds = tf.data.Dataset.from_generator(rows, output_signature=(
        tf.TensorSpec((None,) + shape, tf.as_dtype(h.dtype)),
        tf.TensorSpec((None,) + label_shape, tf.int64))).unbatch()
    if normalize:
        ds = ds.map(lambda image, label: (tf.cast(image, tf.float32) / 255.0, label))
    return ds
