"""TFDS prepared dataset directories (layout in format.py). This file is the format's
declaration, light enough for `--help`; the code is in format.py, imported on first
use."""

from ...family.identity import CITATION, DESCRIPTION, HOMEPAGE, LICENSE
from ...model.spec import GREY, RGB, Format, Holds, Option
from ..common import SPLIT_NAME, WORKERS, lazy_attributes, shard_size_option, \
    shards_option

SHARDS = shards_option("<name>-<split>.<format>-00000-of-0000N",
                       "TFDS' rule, 64 MiB to 1 GiB a shard, or --shard-size")

SPEC = Format(
    "tfds", "mnistconv.formats.tfds.format",
    "TFDS prepared dataset directory (DIR/<name>/<version>/: dataset_info.json, "
    "features.json, TFRecord or ArrayRecord shards of PNG Examples; "
    "tfds.builder_from_directory reads it)",
    output_is_directory=True,
    read_options=(SPLIT_NAME,),
    write_options=(
        Option("name", "--name", "The dataset's name (TFDS: letters, digits, '_'; default: "
               "a published dataset's when the input's files match its checksums: mnist, "
               "fashion_mnist, ...; else the output's name)", "str"),
        Option("version", "--version", "The dataset's version MAJOR.MINOR.PATCH (TFDS "
               "default: 1.0.0)", "str"),
        DESCRIPTION, LICENSE, CITATION, HOMEPAGE,
        SHARDS,
        shard_size_option("Target bytes", "TFDS' rule, 64 MiB to 1 GiB a shard"),
        Option("file_format", "--file-format", "Shard file format", "choice",
               ("tfrecord", "array_record"), "tfrecord"),
        WORKERS,
    ),
    writer="mnistconv.formats.tfds.format", plannable=True,
    # One features.json Image for every split; tf.image.encode_png's grey or RGB PNGs.
    holds=Holds(channels=GREY + RGB, one_image_size=True),
)

__getattr__ = lazy_attributes(SPEC.module)
