"""What the loaders (mnistconv.tf.dataset, mnistconv.torch.dataset, mnistconv.grain.source)
share, so they take `(path, split=None, *, format=None, **read_options)` alike: one rule
choosing the split, and a keyword neither the loader nor the reader takes refused as a
UsageError listing the ones they do.
"""

import inspect

from ..errors import UsageError

# read()'s own keywords, taken whatever the format.
READ_KEYWORDS = ("split_name", "grayscale", "follow_links", "class_names")


def split_name(names, split, path) -> str:
    """The split a loader reads: `split` when given, else the only one, else 'train';
    a UsageError naming the splits there are when it is not among them."""
    names = list(names)
    if split is None:
        if len(names) == 1:
            return names[0]
        if "train" not in names:
            raise UsageError(path, f"holds several splits ({', '.join(names)}) and none "
                                   "is named train", "choose one with split=")
        split = "train"
    if split not in names:
        raise UsageError(path, f"no split named {split}",
                         f"splits present: {', '.join(names) or 'none'}")
    return split


def format_name(path, format):
    """The format a loader reads `path` as: `format` when named, else the detected one,
    else None (a glob or shard set, which the TFRecord and ArrayRecord resolvers name)."""
    if format is not None:
        return format
    import mnistconv
    from ..errors import MnistconvError
    try:
        return mnistconv.detect(path).name
    except MnistconvError:
        return None


def read_keywords(fmt) -> list:
    """The keywords mnistconv.read takes for format `fmt` (a registry Format)."""
    takes = [o.name for o in fmt.read_options]
    takes += [p for p in inspect.signature(fmt.load().read).parameters if p != "path"]
    return list(dict.fromkeys(takes + list(READ_KEYWORDS)))


def read(loader, own, path, format, read_options):
    """mnistconv.read(path, format, **read_options) for `loader` (its name, for messages;
    `own`: its own keywords), a keyword the format's reader does not take refused first,
    listing the loader's keywords and the reader's."""
    import mnistconv
    from ..formats import registry
    if read_options:
        fmt = registry.get(format) if format else mnistconv.detect(path)
        takes = read_keywords(fmt)
        unknown = [key for key in read_options if key not in takes]
        if unknown:
            raise UsageError(None, f"{loader} takes no keyword '{unknown[0]}'",
                             f"it takes: {', '.join(own)}; and reading {fmt.name}: "
                             f"{', '.join(takes)}")
    return mnistconv.read(path, format, **read_options)
