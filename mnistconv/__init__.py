"""mnistconv: convert MNIST-like image datasets between IDX, npz, TFRecord and GDMNIST1.

    import mnistconv
    ds = mnistconv.read("data/mnist")                  # format detected by content
    files = mnistconv.write(ds, "mnist.npz")           # format from the name
    mnistconv.convert("data/mnist", "out/", to="idx", gzip=True)

Errors are raised as mnistconv.MnistconvError with the file and what is wrong.
"""

from . import registry
from .errors import FormatError, MnistconvError, UsageError

# The record types need numpy; they are loaded on first use so that `mnistconv --help`
# (which imports this package) does not pay for numpy.
_RECORD_TYPES = ("NO_PROGRESS", "ArraySplit", "Batch", "Dataset", "Header", "OutputFile",
                 "Split")


def __getattr__(name):
    if name in _RECORD_TYPES:
        from . import records
        return getattr(records, name)
    raise AttributeError(f"module 'mnistconv' has no attribute '{name}'")


__version__ = "0.1.0"

__all__ = ["read", "write", "convert", "formats", "Dataset", "Split", "ArraySplit",
           "Batch", "Header", "OutputFile", "MnistconvError", "FormatError", "UsageError"]


def formats():
    """The registered formats, by name."""
    return dict(registry.FORMATS)


def read(path, format=None, **options):
    fmt = registry.get(format) if format else registry.detect_input(path)
    return fmt.load().read(str(path), **options)


def write(dataset, path, format=None, *, force=False, progress=None, **options) -> list:
    from .records import NO_PROGRESS
    fmt = registry.get(format) if format else registry.detect_output(path)
    if not fmt.can_write:
        raise UsageError(path, f"mnistconv cannot write {fmt.name}")
    return fmt.load().write(dataset, str(path), force=force,
                            progress=progress or NO_PROGRESS, **options)


def convert(src, dst, from_=None, to=None, *, read_options=None, select=None,
            force=False, progress=None, **write_options) -> list:
    """Read src, apply a selection (a dict of stream.select arguments), write dst."""
    from . import stream
    dataset = read(src, from_, **(read_options or {}))
    if select:
        dataset = stream.select(dataset, **select)
    return write(dataset, dst, to, force=force, progress=progress, **write_options)
