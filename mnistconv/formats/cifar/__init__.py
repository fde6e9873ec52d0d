"""CIFAR-10 and CIFAR-100, binary version: the declaration (light, for `--help`); the
code and byte layout are in format.py."""

from ...model.spec import RGB, Format, Holds
from ..common import CLASS_NAMES, SPLIT_NAME, lazy_attributes

SPEC = Format(
    "cifar", "mnistconv.formats.cifar.format",
    "CIFAR-10/100 binary version (cifar-10-batches-bin: data_batch_1..5.bin, "
    "test_batch.bin, batches.meta.txt; cifar-100-binary: train.bin, test.bin and the "
    "label name files)",
    read_options=(SPLIT_NAME, CLASS_NAMES),
    can_write=False,
    split_names_from_file_names=True,
    holds=Holds(channels=RGB, extras=True),  # what its files hold (CIFAR-100's coarse label)
)

__getattr__ = lazy_attributes(SPEC.module)
