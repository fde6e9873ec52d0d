"""Quick, Draw!'s numpy_bitmap files: one .npy of 28x28 drawings per class (byte
layout in format.py). This file is the format's declaration, light enough for
`--help`; the code is in format.py, imported on first use."""

from ...spec import Format
from ..common import CLASS_NAMES, SPLIT_NAME, lazy_attributes

SPEC = Format(
    "quickdraw", "mnistconv.formats.quickdraw.format",
    "Quick, Draw! numpy_bitmap: a directory of full_numpy_bitmap_<class>.npy files "
    "(N x 784 uint8 each), one class per file",
    extensions=(".npy",),
    read_options=(SPLIT_NAME, CLASS_NAMES),
    can_write=False,
    split_names_from_file_names=True,
)

__getattr__ = lazy_attributes(SPEC.module)
