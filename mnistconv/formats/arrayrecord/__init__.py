"""ArrayRecord files of tf.train.Example records (layout in format.py), the
random-access format of tfds.data_source and Grain. This file is the format's
declaration, light enough for `--help`; the code is in format.py, imported on first
use."""

from ...model.spec import GREY, RGB, Format, Holds, Option
from ..common import SPLIT_NAME, WORKERS, lazy_attributes, shards_option

SPEC = Format(
    "arrayrecord", "mnistconv.formats.arrayrecord.format",
    "ArrayRecord files of tf.train.Example records (PNG image, int64 label, as TFDS "
    "writes them; random access for Grain and tfds.data_source; Python 3.11+)",
    extensions=(".array_record",),
    split_names_from_file_names=True,
    read_options=(SPLIT_NAME,),
    write_options=(
        shards_option("DST-00000-of-0000N"),
        Option("group_size", "--group-size", "Records per ArrayRecord chunk, 1..65536: 1 "
               "(the default, TFDS' and Grain's) reads any record alone; larger packs "
               "tighter and reads sequentially faster", "int", (), 1, low=1, high=65536),
        Option("array_record_options", "--array-record-options", "More ArrayRecord "
               "writer options, passed through, e.g. 'zstd:9,window_log:20' or "
               "'uncompressed' (checked by array_record itself)", "str"),
        WORKERS,
    ),
    holds=Holds(channels=GREY + RGB),  # PNGs as TFDS writes them: grey or RGB
)

__getattr__ = lazy_attributes(SPEC.module)
