"""What the format packages share (light: no numpy until used)."""

import importlib
import importlib.util

from ..limits import DEFAULT_JPEG_QUALITY, MAX_SHARDS, SIZE_UNITS_HELP
from ..model.spec import Option

# Every reader takes it; mnistconv.read() applies it (see there).
SPLIT_NAME = Option("split_name", "--split-name", "Name of the split of a single-split "
                    "input (default: recorded in the file, else from the file name: "
                    "train/test/validation, t10k -> test; a note says it was assumed)",
                    "str")

# mnistconv.read() applies it to whatever the format's reader returns (codecs.classes).
CLASS_NAMES = Option("class_names", "--class-names", "a text file naming the classes, "
                     "one name per line, the name of label 0 first (default: the "
                     "names the input records, if any)", "path")

# Every format that encodes on mnistconv.workers.parallel's workers takes it.
WORKERS = Option("workers", "--workers", "Encoding processes, 1..64 (default: one per "
                 "core)", "int", low=1, high=64)

# The formats that write JPEGs take it; every JPEG encoder defaults to the same quality.
JPEG_QUALITY = Option("jpeg_quality", "--jpeg-quality", "JPEG quality 1..100 (95 is "
                      "OpenCV's default, the recipe's)", "int", (), DEFAULT_JPEG_QUALITY,
                      low=1, high=100)


class InOrder:
    """Mixin of a Split whose files store no original indices: a file's order is its own."""

    def indices(self):
        """0 .. count-1."""
        import numpy as np
        return np.arange(self.header.count, dtype=np.int64)


def shards_option(naming: str, default: str = "one file per split") -> Option:
    """--shards, declared once for every format that cuts a split into files: the
    range is the same everywhere; only how the files are named and the default differ."""
    return Option("shards", "--shards", f"Cut each split into N files (1..{MAX_SHARDS}), "
                  f"named {naming} (default: {default})", "int", low=1, high=MAX_SHARDS)


def shard_size_option(what: str, default: str) -> Option:
    """--shard-size, declared once: a size with a unit means what limits.parse_bytes says
    for every format; only what else it counts and the default differ."""
    return Option("shard_size", "--shard-size", f"{what} per shard with a unit, 256MB or "
                  f"1GiB ({SIZE_UNITS_HELP}) (default: {default})", "str")


def lazy_attributes(module_name):
    """A module __getattr__ finding a format package's names (read, write, ...) in its
    code module, imported on first use (`--help` does not pay for numpy)."""
    package = module_name.rpartition(".")[0]

    def __getattr__(name):
        if name.startswith("__") or \
                importlib.util.find_spec(f"{package}.{name}") is not None:
            # A submodule is imported as itself, not looked up in the half-imported
            # code module.
            raise AttributeError(name)
        return getattr(importlib.import_module(module_name), name)
    return __getattr__
