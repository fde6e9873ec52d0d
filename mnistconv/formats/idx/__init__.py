"""IDX, the MNIST database's own format: the declaration (light, for `--help`); the
code and byte layout are in format.py."""

from ...model.spec import Format, Holds, Option
from ..common import CLASS_NAMES, SPLIT_NAME, lazy_attributes

SPEC = Format(
    "idx", "mnistconv.formats.idx.format",
    "IDX, the MNIST database's own format (a directory of images/labels files)",
    split_names_from_file_names=True,
    read_options=(
        SPLIT_NAME,
        Option("labels", "--labels", "labels file for a single images file "
               "(default: found by name)", "path"),
        Option("prefix", "--prefix", "file family in a directory, e.g. emnist-balanced "
               "for emnist-balanced-train-images-idx3-ubyte", "str"),
        Option("relabel", "--relabel", "labels from 0: EMNIST letters' 1..26 become "
               "0..25 (their class names move with them)"),
        CLASS_NAMES,
    ),
    write_options=(
        Option("gzip", "--gzip", "write .gz files (deterministic: level 9, mtime 0)"),
        Option("gzip_level", "--gzip-level", "deflate level of --gzip: 1 (fastest) to 9 "
               "(smallest); the same bytes for the same data and level, on any number "
               "of cores", "int", (), 9, low=1, high=9),
        Option("layout", "--layout", "flat: the files in the directory itself; "
               "torchvision: DIR/<Dataset>/raw/<its file names>, uncompressed, as "
               "torchvision.datasets.MNIST(DIR, download=False) and its siblings read "
               "them (see --torchvision-dataset)", "choice", ("flat", "torchvision"),
               "flat"),
        Option("torchvision_dataset", "--torchvision-dataset", "torchvision's dataset "
               "class whose names --layout torchvision writes", "choice",
               ("MNIST", "FashionMNIST", "KMNIST", "QMNIST", "EMNIST-balanced",
                "EMNIST-byclass", "EMNIST-bymerge", "EMNIST-digits", "EMNIST-letters",
                "EMNIST-mnist"), "MNIST"),
    ),
    output_is_directory=True,
    # Any array IDX has an element type for; torchvision's layout: what its readers take.
    holds=Holds(channels=None, dtypes=("uint8", "int8", "int16", "int32", "float32",
                                       "float64")),
    holds_when=(("layout", "torchvision", Holds()),),
)

__getattr__ = lazy_attributes(SPEC.module)
