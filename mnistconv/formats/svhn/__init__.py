"""SVHN's cropped digits (format 2) as MATLAB .mat files: the declaration (light, for
`--help`); the code and byte layout are in format.py."""

from ...model.spec import RGB, Format, Holds
from ..common import CLASS_NAMES, SPLIT_NAME, lazy_attributes

SPEC = Format(
    "svhn", "mnistconv.formats.svhn.format",
    "SVHN cropped digits, MATLAB v5 .mat (train_32x32.mat, test_32x32.mat, "
    "extra_32x32.mat: X 32 x 32 x 3 x N, y N x 1 with 10 for the digit 0)",
    extensions=(".mat",),
    read_options=(SPLIT_NAME, CLASS_NAMES),
    can_write=False,
    split_names_from_file_names=True,
    holds=Holds(channels=RGB),  # what its files hold
)

__getattr__ = lazy_attributes(SPEC.module)
