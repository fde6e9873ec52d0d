"""KMNIST / Kuzushiji-49 as published in numpy form: the declaration (light, for
`--help`); the code and byte layout are in format.py."""

from ...model.spec import Format, Holds, Option
from ..common import CLASS_NAMES, SPLIT_NAME, lazy_attributes

SPEC = Format(
    "kmnist", "mnistconv.formats.kmnist.format",
    "KMNIST/Kuzushiji-49 npz pairs (kmnist-train-imgs.npz + kmnist-train-labels.npz, "
    "each arr_0) with their class map CSV",
    read_options=(
        SPLIT_NAME,
        Option("prefix", "--prefix", "file family in a directory, e.g. k49 for "
               "k49-train-imgs.npz", "str"),
        CLASS_NAMES,
    ),
    can_write=False,
    split_names_from_file_names=True,
    holds=Holds(),  # what its files hold (it is not written)
)

__getattr__ = lazy_attributes(SPEC.module)
