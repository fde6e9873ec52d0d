"""GDMNIST1, the compact binary a web page loads: the declaration (light, for
`--help`); the code and byte layout are in format.py."""

from ...model.spec import Format, Holds, Option
from ..common import SPLIT_NAME, lazy_attributes

SPEC = Format(
    "gdmnist", "mnistconv.formats.gdmnist.format",
    "GDMNIST1 browser binaries (.bin, .bin.gz; a directory of them or a browser pack)",
    extensions=(".bin", ".bin.gz"),
    compression_suffixes=((".gz", ("gzip", True)),),
    split_names_from_file_names=True,
    read_options=(SPLIT_NAME,),
    write_options=(
        Option("gzip", "--gzip", "write .gz files (deterministic: level 9, mtime 0)"),
    ),
    stdio=True,
    holds=Holds(max_classes=256),  # grey uint8 images, uint8 labels
)

__getattr__ = lazy_attributes(SPEC.module)
