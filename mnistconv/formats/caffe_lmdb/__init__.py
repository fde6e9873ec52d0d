"""Caffe's LMDB of caffe.Datum (layout in format.py, the Datum in datum.py): the format's
declaration, light enough for `--help`; the code (it needs `lmdb`) loads on first use."""

from ...model.spec import Format, Holds, Option
from ..common import SPLIT_NAME, lazy_attributes

SPEC = Format(
    "caffe-lmdb", "mnistconv.formats.caffe_lmdb.format",
    "Caffe's LMDB of Datum protos (<split>_lmdb/data.mdb, as convert_mnist_data writes)",
    output_is_directory=True,
    read_options=(SPLIT_NAME,),
    write_options=(
        Option("encoded", "--encoded", "PNG-encoded Datums (encoded = true, as "
               "convert_imageset --encoded writes) instead of raw pixels"),
    ),
    # Raw Datums hold C x H x W uint8; PNG-encoded ones are grey here.
    holds=Holds(channels=(1, 2, 3, 4)),
    holds_when=(("encoded", True, Holds()),),
)

__getattr__ = lazy_attributes(SPEC.module)
