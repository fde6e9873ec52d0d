"""HDF5 for Caffe's HDF5Data layer: the declaration (light, for `--help`); the code
and layout are in format.py (imported on first use: it needs `h5py`)."""

from ...model.spec import Format, Holds, Option
from ..common import SPLIT_NAME, lazy_attributes

SPEC = Format(
    "caffe-hdf5", "mnistconv.formats.caffe_hdf5.format",
    "HDF5 for Caffe's HDF5Data layer (<split>.h5 with data N x C x H x W and label N, "
    "and the <split>.txt list file)",
    extensions=(".h5", ".hdf5"),
    output_is_directory=True,
    read_options=(SPLIT_NAME,),
    write_options=(
        Option("no_scale", "--no-scale", "keep float32 pixels 0..255 (default: scaled "
               "to [0, 1], as Caffe's MNIST models' scale: 0.00390625 does)"),
        Option("pixel_type", "--pixel-type", "type of the data dataset (uint8 keeps the "
               "bytes; Caffe reads either as float)", "choice", ("float32", "uint8"),
               "float32"),
        Option("compress", "--compress", "gzip-compress the datasets (HDF5's shuffle and "
               "deflate filters, level 4; Caffe's HDF5 library reads them)"),
    ),
    holds=Holds(channels=(1, 2, 3, 4), dtypes=(
        "bool", "uint8", "uint16", "uint32", "uint64", "float16", "float32", "float64")),
    holds_when=(("pixel_type", "uint8", Holds(channels=(1, 2, 3, 4))),),
)

__getattr__ = lazy_attributes(SPEC.module)
