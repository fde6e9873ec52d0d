"""Hugging Face Parquet: an image classification dataset as the Hub keeps it (byte
layout in format.py). This file is the format's declaration, light enough for `--help`;
the code is in format.py, imported on first use (it needs pyarrow: the `parquet`
extra)."""

from ...spec import Format, Option
from ..common import SPLIT_NAME, WORKERS, lazy_attributes

SPEC = Format(
    "parquet", "mnistconv.formats.parquet.format",
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
        Option("shards", "--shards", "Cut each split into N files (1..10000), numbered "
               "-00000-of-0000N (default: one file per split)", "int", low=1, high=10000),
        Option("row_group_size", "--row-group-size", "Parquet rows per row group, the "
               "unit a streaming reader fetches (default 1000: about 250 KB of MNIST "
               "PNGs)", "int", (), 1000, low=1, high=1 << 20),
        WORKERS,
    ),
    sharded="mnistconv.formats.parquet.writer",
)

__getattr__ = lazy_attributes(SPEC.module)
