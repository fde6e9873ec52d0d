"""Hugging Face Parquet: an image classification dataset as the Hub keeps it
(ylecun/mnist, zalando-datasets/fashion_mnist) and as `datasets` writes it.

A dataset directory (what `push_to_hub` uploads):
    README.md                               dataset card; its YAML header lists the
                                            configs, data_files, features and splits
    <folder>/<split>-00000-of-0000N.parquet one shard set per split; <folder> is the
                                            config's name, or data/ for 'default'
Each Parquet file (https://parquet.apache.org/docs/file-format/: "PAR1", column
chunks in row groups, the Thrift footer, its length, "PAR1") holds the columns:
    image  struct<bytes: binary, path: string>   the PNG (or JPEG) file's bytes; path null
    label  int64                                 the class index
    <name> int32 (0 or more)                     the record's extra fields, if any
                                                 (QMNIST's hsf_series, writer_id, ...)
and the Arrow schema's key-value metadata carries `huggingface`, the datasets features
as JSON (card.py).

mnistconv writes 8-bit grey (or RGB) PNGs without filters (codecs/png.py), image columns
PLAIN and uncompressed and the label (and extra) columns snappy with a dictionary (as
datasets does), row groups of 1000 rows by default. Reading takes a file, a shard set,
`<config>/<split>-*.parquet` (`config` chooses among several), `<split>.parquet`, or the
Hub's converted `<config>/<split>/0000.parquet`; the image and label columns are found
by name, else by their Image and ClassLabel features; other integer columns of 32 bits
or fewer are the records' extra fields, each value checked to fit int32.
The code is in reader.py and writer.py (the format's module), imported on first use: it
needs pyarrow (the `parquet` extra).
"""

from ...family.identity import OPTIONS as IDENTITY
from ...model.spec import Described, Format, GREY, Holds, Option, RGB
from ..common import SPLIT_NAME, WORKERS, lazy_attributes, shards_option

SPEC = Format(
    "parquet", "mnistconv.formats.parquet.writer",
    "Hugging Face Parquet, as the Hub keeps it (<config>/<split>-00000-of-00001.parquet: "
    "image PNG + label, features in the schema, a README.md card; needs pyarrow)",
    extensions=(".parquet",),
    output_is_directory=True,
    split_names_from_file_names=True,
    read_options=(
        SPLIT_NAME,
        Option("config", "--config", "Hugging Face configuration: reading, which of a "
               "directory's <config>/ folders to read (needed when it has several); "
               "writing Parquet, the folder and config_name to write (default: data/, "
               "config 'default', as push_to_hub does)", "str"),
    ),
    write_options=(
        Option("config", "--config", "Configuration to write: files go in <config>/ "
               "and the card names it (default: data/ and 'default', as push_to_hub "
               "does)", "str"),
        shards_option("-00000-of-0000N"),
        Option("row_group_size", "--row-group-size", "Parquet rows per row group, the "
               "unit a streaming reader fetches (default 1000, about 250 KB of MNIST PNGs; "
               "fewer when 1000 images would pass 8 MiB of pixels)",
               "int", (), None, low=1, high=1 << 20),
        WORKERS,
    ) + IDENTITY,
    writer="mnistconv.formats.parquet.writer", plannable=True,
    holds=Holds(channels=GREY + RGB, extras=True),
    # (one .parquet file is not a folder: it gets no README.md nor croissant.json)
    described=Described("Hugging Face Parquet", "{folder}/{split}-*-of-*{suffix}",
                        ((".parquet", "application/x-parquet"),), listed=True,
                        records="table"),
)

__getattr__ = lazy_attributes(SPEC.module)
