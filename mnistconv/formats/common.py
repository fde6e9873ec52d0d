"""What the format declarations share (light: no numpy)."""

import importlib

from ..spec import Option

# Every reader takes it; mnistconv.read() applies it (see there).
SPLIT_NAME = Option("split_name", "--split-name", "Name of the split of a single-split "
                    "input (default: recorded in the file, else from the file name: "
                    "train/test/validation, t10k -> test; a note says it was assumed)",
                    "str")


def lazy_attributes(module_name):
    """A module __getattr__ that finds a format package's names (read, write, ...) in
    its code module, imported on first use: `from mnistconv.formats import idx;
    idx.read(...)` works without `--help` paying for numpy."""
    def __getattr__(name):
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(importlib.import_module(module_name), name)
    return __getattr__
