"""Quick, Draw!'s numpy_bitmap files: the declaration (light, for `--help`); the
code and byte layout are in format.py."""

from ...model.spec import Format, Holds
from ..common import CLASS_NAMES, SPLIT_NAME, lazy_attributes

SPEC = Format(
    "quickdraw", "mnistconv.formats.quickdraw.format",
    "Quick, Draw! numpy_bitmap: a directory of full_numpy_bitmap_<class>.npy files "
    "(N x 784 uint8 each), one class per file",
    extensions=(".npy",),
    read_options=(SPLIT_NAME, CLASS_NAMES),
    can_write=False,
    split_names_from_file_names=True,
    holds=Holds(),  # what its files hold (it is not written)
)

__getattr__ = lazy_attributes(SPEC.module)
