"""TFRecord files of tf.train.Example records, read and written without TensorFlow.

Byte layout of a TFRecord file (codecs/framing.py): records back to back, each
    uint64  length of the data, little-endian
    uint32  masked CRC-32C of those 8 length bytes, little-endian
    bytes   data (length bytes): here a serialized tf.train.Example
    uint32  masked CRC-32C of the data, little-endian
where mask(c) = ((c >> 15) | (c << 17)) + 0xa282ead8, modulo 2**32. A whole file may be
GZIP- or ZLIB-compressed (TensorFlow is told which: compression_type="GZIP"); written at
level 9 with mtime 0, detected from content on read. A shard set is name-00000-of-00004
... name-00003-of-00004 (TensorFlow's naming, mnistconv.io.shards), records in shard order;
several splits are written as name-train.tfrecord, name-test.tfrecord (and read back
from `name`; names.py). Hidden files and staging leftovers are never read as shards or
splits. '-' is one unsharded split on stdout, or a file read from stdin.

The data of a record, for the default convention (protobuf wire format; map entries in
key order, as serialize(deterministic=True) writes them):
    0A len Features
      0A len { 0A 05 "image"  12 len { 0A len BytesList { 0A len <JPEG bytes> } } }
      0A len { 0A 05 "label"  12 len { 1A len Int64List { 0A 0A <10 varints 0/1> } } }

Each Example (see codecs/example.py for the message layout) follows one of these conventions
("presets"); all int64 features are int64_list, all bytes bytes_list:
    recipe (default)  image: one JPEG; label: one-hot over the classes (10 for MNIST)
    tfds              image: one PNG; label: the class index (one value)
    slim              image/encoded: one PNG (TF-slim's download_and_convert_mnist.py),
                      image/format (b"png"/b"jpeg"/b"raw"), image/class/label
                      (index), image/height, image/width
Options change the image encoding (jpeg, png, raw: the H*W uint8 pixels row-major, with
height and width features added when the preset has none) and the label (onehot,
index), and add the original index as "index" ("image/index" for slim). JPEG is lossy:
the writer reports the pixel error as tf.io.decode_jpeg's defaults decode it. Reading
checks both CRCs and what a file claims (limits.py) before believing it.

This file imports no other module until a name is used, so `--help` pays for nothing.

    from mnistconv.formats import tfrecord
    ds = tfrecord.read("mnist.tfrecord")
    mnistconv.write(ds, "copy.tfrecord", preset="tfds", shards=4)
"""

from ...model.spec import GREY, RGB, Format, Holds, Option
from ..common import JPEG_QUALITY, SPLIT_NAME, WORKERS, lazy_attributes, shards_option

SPEC = Format(
    "tfrecord", "mnistconv.formats.tfrecord.format",
    "TFRecord of tf.train.Example (JPEG image + one-hot label by default; no TensorFlow "
    "needed)",
    extensions=(".tfrecord", ".tfrecords", ".tfrec"),
    compression_suffixes=((".gz", ("compression", "gzip")), (".zz", ("compression", "zlib")),
                          (".zlib", ("compression", "zlib"))),
    split_names_from_file_names=True,
    read_options=(
        SPLIT_NAME,
        Option("schema", "--schema", "Feature convention of the records (default: "
               "detected from the first record)", "choice",
               ("auto", "recipe", "tfds", "slim"), "auto"),
        Option("input_compression", "--input-compression", "Compression of the input "
               "files (default: detected from content)", "choice",
               ("auto", "none", "gzip", "zlib"), "auto"),
    ),
    write_options=(
        Option("preset", "--preset", "Feature convention: recipe (image JPEG, one-hot "
               "label), tfds (image PNG, scalar label), slim (TF-slim's MNIST converter: "
               "PNG image/encoded, image/format, image/class/label, image/height, "
               "image/width)", "choice",
               ("recipe", "tfds", "slim"), "recipe"),
        Option("image_format", "--image-format", "Image encoding (default: the preset's; "
               "jpeg is lossy, png and raw are exact)", "choice", ("jpeg", "png", "raw")),
        JPEG_QUALITY,
        Option("label_format", "--label-format", "Label as a one-hot int64 list or a "
               "class index (default: the preset's)", "choice", ("onehot", "index")),
        Option("with_index", "--with-index", "Add each example's original index as an "
               "int64 feature 'index'"),
        shards_option("as TensorFlow does: DST-00000-of-0000N for one split, "
                      "<stem>-<split>.tfrecord-00000-of-0000N for several; with --preset "
                      "tfds even --shards 1 gets the -00000-of-00001 suffix TFDS expects",
                      "one file per split, no suffix"),
        Option("compression", "--compression", "Compress whole files as TensorFlow's "
               "compression_type GZIP or ZLIB", "choice", ("none", "gzip", "zlib"), "none"),
        Option("exact_jpeg_error", "--exact-jpeg-error", "Measure the JPEG pixel error on "
               "every record, not the first 63 of every 1000 (decodes them all: "
               "about 20% slower)"),
        WORKERS,
        Option("index_files", "--index-files", "Also write <file>.idx beside every "
               "output file: an 'offset length' line per record (DALI's tfrecord2idx, "
               "the tfrecord package's index; uncompressed output only)"),
    ),
    stdio=True,
    writer="mnistconv.formats.tfrecord.writer", plannable=True,
    holds=Holds(extras=True),  # extras as int64 features
    # RGB as PNG (the tfds and slim presets', or --image-format png); JPEG and raw
    # stay grey.
    holds_when=(("image_format", "jpeg", Holds(extras=True)),
                ("image_format", "raw", Holds(extras=True)),
                ("image_format", "png", Holds(channels=GREY + RGB, extras=True)),
                ("preset", "tfds", Holds(channels=GREY + RGB, extras=True)),
                ("preset", "slim", Holds(channels=GREY + RGB, extras=True))),
)


__getattr__ = lazy_attributes(SPEC.module)
