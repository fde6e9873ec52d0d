"""CIFAR-10 and CIFAR-100, python version: the declaration (light, for `--help`); the
code, the byte layout and the restricted unpickler are in format.py and unpickle.py."""

from ...model.spec import RGB, Format, Holds
from ..common import CLASS_NAMES, SPLIT_NAME, lazy_attributes

SPEC = Format(
    "cifar-python", "mnistconv.formats.cifar_python.format",
    "CIFAR-10/100 python version (cifar-10-batches-py: data_batch_1..5, test_batch, "
    "batches.meta; cifar-100-python: train, test, meta), read without running the "
    "pickles",
    read_options=(SPLIT_NAME, CLASS_NAMES),
    can_write=False,
    split_names_from_file_names=True,
    holds=Holds(channels=RGB, extras=True),  # what its files hold (CIFAR-100's coarse label)
)

__getattr__ = lazy_attributes(SPEC.module)
