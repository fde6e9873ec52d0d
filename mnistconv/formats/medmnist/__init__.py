"""MedMNIST's .npz files (MedMNIST v2 and MedMNIST+, every size): the declaration (light,
for `--help`); the code and byte layout are in format.py."""

from ...model.spec import CLASS, GREY, MULTILABEL, RGB, Format, Holds
from ..common import CLASS_NAMES, SPLIT_NAME, lazy_attributes

SPEC = Format(
    "medmnist", "mnistconv.formats.medmnist.format",
    "MedMNIST .npz (pathmnist.npz, chestmnist_224.npz, ...: train/val/test _images and "
    "_labels; ChestMNIST's 14 labels per image)",
    read_options=(SPLIT_NAME, CLASS_NAMES),
    can_write=False,
    # What its files hold: grey or RGB, one class or ChestMNIST's multi-label target.
    holds=Holds(channels=GREY + RGB, targets=(CLASS, MULTILABEL)),
)

__getattr__ = lazy_attributes(SPEC.module)
