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
and the Arrow schema in its key-value metadata carries `huggingface`: the datasets
features as JSON, {"info": {"features": {"image": {"_type": "Image"}, "label":
{"names": [...], "_type": "ClassLabel"}, <name>: {"dtype": "int32", "_type": "Value"}
...}}} (see card.py).

mnistconv writes 8-bit grey (or RGB) PNGs without filters (codecs/png.py), image columns
PLAIN and uncompressed and the label (and extra) columns snappy with a dictionary (as
datasets does), row groups of 1000 rows by default, so a streaming reader fetches
~250 KB of MNIST at a time. Reading takes any Parquet file or directory of this schema:
a file, a shard set, `<config>/<split>-*.parquet` (one config folder, or several chosen
with `config`), `<split>.parquet`, or the Hub's converted `<config>/<split>/0000.parquet`.
The image and label columns are found by name, else by their Image and ClassLabel
features; images are decoded (PNG or JPEG) and must share one size per split. Other
integer columns (any width) are the records' extra fields, read when a writer keeping
them asks (stream.extra_fields), each value checked to fit int32.
"""

from .reader import ParquetSplit, matches_name, pyarrow, read, sniff  # noqa: F401
from .writer import write  # noqa: F401
