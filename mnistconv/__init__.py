"""mnistconv: convert MNIST-like image datasets between the formats of TensorFlow, JAX,
PyTorch, Hugging Face and Caffe (IDX, npz, TFRecord, TFDS, ArrayRecord, Parquet,
WebDataset, ImageFolder, LMDB, HDF5, GDMNIST1).

    import mnistconv
    ds = mnistconv.read("data/mnist")                  # format detected by content
    files = mnistconv.write(ds, "mnist.npz")           # format from the name
    mnistconv.convert("data/mnist", "out/", to="idx", gzip=True)

Errors are raised as mnistconv.MnistconvError with the file and what is wrong; the
library never prints, never exits and leaves signal handling to its host.
"""

# First, before any import that start-up has not already made (typing, re...): a Ctrl-C
# in those would be a traceback. process.py imports only os, signal and sys.
from .workers.process import guard_start_up

guard_start_up()  # the `mnistconv` program only: see process.py; nothing in a library host
import os  # noqa: E402 (after the guard)
from typing import TYPE_CHECKING, Any, Optional, Union  # noqa: E402

from .formats import registry  # noqa: E402
from .errors import CannotWrite, FormatError, MnistconvError, UsageError  # noqa: E402

if TYPE_CHECKING:
    from .model.records import Dataset, Progress, WriteResult
    from .model.spec import Format
PathArg = Union[str, "os.PathLike[str]"]  # a path, or a URL (a str)

# The record types need numpy: loaded on first use, so `mnistconv --help` does not.
_RECORD_TYPES = ("NO_PROGRESS", "ArraySplit", "Batch", "Dataset", "Header", "OutputFile",
                 "Progress", "Split")


# The loaders, mnistconv.tf / .torch / .grain, live in mnistconv.loaders: found on first
# use, so that `mnistconv.tf.dataset(...)` and `from mnistconv import tf` import no
# framework until called.
_LOADERS = ("tf", "torch", "grain")


def __getattr__(name):
    if name in _RECORD_TYPES:
        from .model import records
        return getattr(records, name)
    if name in _LOADERS:
        import importlib
        return importlib.import_module(f".loaders.{name}", __name__)
    raise AttributeError(f"module 'mnistconv' has no attribute '{name}'")


__version__ = "0.1.0"

__all__ = ["read", "write", "convert", "formats", "Dataset", "Split", "ArraySplit",
           "Batch", "Header", "OutputFile", "Progress", "MnistconvError", "FormatError",
           "UsageError"]


def formats() -> "dict[str, Format]":
    """The registered formats, by name: each a spec.Format declaring its extensions and
    its read and write options (the keyword arguments read() and write() take).

        mnistconv.formats()["npz"].extensions                     # ('.npz',)
        [o.name for o in mnistconv.formats()["idx"].write_options]  # ['gzip', 'gzip_level']
    """
    return dict(registry.FORMATS)


def _file_url(path):
    """A file:// URL as the local path it names, so every rule of local paths applies."""
    text = str(path)
    if text[:7].lower() == "file://" and "/" in text[7:]:
        from urllib.parse import unquote
        host, rest = text[7:].split("/", 1)
        if host in ("", "localhost"):
            return unquote("/" + rest)
    return path


def detect(path: PathArg, from_flag: str = "--from") -> "Format":
    """The format of an input, by content first, then by name (a remote path on its
    local copy). `from_flag` names the format's option in the message when it fails.

        mnistconv.detect("data/mnist").name  # 'idx'
    """
    path = _file_url(path)
    if "://" in str(path):
        from .io import remote
        if remote.is_remote(path):
            return remote.detect_input(path, registry.detect_input, from_flag)
    return registry.detect_input(path, from_flag)


def _complete_commits(path) -> None:
    """A commit a killed run left half done where path is, finished before it is read:
    the output is then the earlier set or the new one, never a mix (journal.py)."""
    from .io import journal
    try:
        journal.complete_around(path)
    except OSError as e:
        from .errors import NoAccess
        raise NoAccess(e.filename or path, "a killed run's commit there could not be "
                                           f"finished ({e.strerror})",
                       "run mnistconv again with write access to that folder") from None


def read(path: PathArg, format: Optional[str] = None, *, split_name: Optional[str] = None,
         grayscale: bool = False, follow_links: bool = False, **options: Any) -> "Dataset":
    """Read a dataset: a directory, a file or a shard set, its format detected by
    content (then by name) unless `format` names it. `split_name` names the split of a
    single-split input whose file does not record it (IDX, GDMNIST1, TFRecord; else it
    comes from the file name, and a note says so). `options` are the format's read
    options (see formats()); class_names="classes.txt" names the classes, one per line,
    for any format. Images are read a batch at a time as a split's batches() iterate.
    Colour is kept as stored (H x W x 3 for RGB) unless grayscale=True, which makes it
    grey (ITU-R 601-2 luma, as Pillow's convert("L")) and adds a note saying so.
    A symlink in the input's tree may point only inside it (a Hugging Face cache
    snapshot's links into its blobs count as inside); follow_links=True reads through
    links that leave it, for this tree and the rest of the process (FIFOs, devices
    and sockets are still refused).

        ds = mnistconv.read("data/mnist")
        ds = mnistconv.read("conv3.bin", split_name="test")
        ds = mnistconv.read("annexed/mnist", follow_links=True)  # a git-annex tree
        ds.splits["test"].header.count
    """
    from .limits import check_option_name, is_safe_name, safe_split_name
    path = _file_url(path)
    if "://" in str(path):  # s3://, https://, memory://...: read from a local copy
        from .io import remote
        if remote.is_remote(path):
            return remote.read(path, read, registry.detect_input, format, split_name=split_name,
                               grayscale=grayscale, **options)
    if str(path) != "-":
        _complete_commits(path)
    if os.path.lexists(path) and not os.path.isdir(path) and not os.path.isfile(path):
        # A FIFO or device: a reader opening it would block, or read what it is not.
        raise UsageError(path, "is not a regular file (device, FIFO or socket)",
                         "name a regular file or a directory")
    if follow_links:
        from .io.fileio import follow_links_under
        follow_links_under(str(path))
    fmt = registry.get(format) if format else registry.detect_input(path)
    if split_name is not None:
        check_option_name(split_name, "--split-name")
    # --class-names applies to any reader's result (codecs.classes).
    class_names = options.pop("class_names", None)
    fmt.check_options(options, "read")
    dataset = fmt.load().read(str(path), **options)
    if class_names is not None:
        from .codecs.classes import apply_names_file
        apply_names_file(dataset, class_names)
    for name in dataset.splits:  # every reader's split names, wherever they came from
        if split_name is None or len(dataset.splits) > 1:
            safe_split_name(name, path, "split name (from the input's file names or "
                                        "contents)")
    single = len(dataset.splits) == 1
    if split_name is not None:
        if not single:
            raise UsageError(path, f"--split-name names the split of a single-split input; "
                                   f"this one has {len(dataset.splits)} "
                                   f"({', '.join(dataset.splits)})",
                             "choose splits with --split")
        split = next(iter(dataset.splits.values()))
        split.name = split_name
        dataset.splits = {split_name: split}
    elif single and fmt.split_names_from_file_names and not os.path.isdir(path):
        name = next(iter(dataset.splits))
        if not is_safe_name(name):
            raise FormatError(path, "its split name, taken from the file name, is not a "
                                    "safe name", "name it with --split-name")
        dataset.notes.append(f"{path}: split name '{name}' assumed (the file does not "
                             "record it); choose another with --split-name")
    if grayscale:
        from .model.stream import reduce_to_grayscale
        dataset = reduce_to_grayscale(dataset)
    return dataset


def write(dataset: "Dataset", path: PathArg, format: Optional[str] = None, *,
          force: bool = False, progress: "Optional[Progress]" = None,
          **options: Any) -> "WriteResult":
    """Write a dataset as `format`, or as the output name says: its extension (with a
    compression suffix such as .gz), or an IDX directory (a name ending in '/', an
    existing directory, or one without an extension). An output that exists is replaced
    only with force=True; outputs appear whole or not at all. `progress` (a
    records.Progress) hears how far each split has got; `options` are the format's
    write options (see formats()). Returns the files written, each with .path, .bytes
    and .sha256 (a Parquet directory or ImageFolder tree also gets croissant.json).

        ds = mnistconv.read("data/mnist")
        files = mnistconv.write(ds, "mnist.npz", compress=True)
        mnistconv.write(ds, "out/mnist", gzip=True)              # an IDX directory
        mnistconv.write(ds, "mnist.tfrecord.gz", force=True)     # gzip from the name
    """
    from .model.records import NO_PROGRESS
    path = _file_url(path)
    if "://" in str(path):  # s3://, memory://...: written locally, then uploaded
        from .io import remote
        if remote.is_remote(path):
            fmt = registry.get(format) if format else registry.detect_output(path)
            return remote.write(dataset, path, write, fmt.name, force=force,
                                progress=progress, **options)
    fmt = registry.get(format) if format else registry.detect_output(path)
    if not fmt.can_write:
        raise CannotWrite(path, f"mnistconv cannot write {fmt.name}")
    from .formats import contract
    path, options = contract.checked_options(fmt, path, options)  # the name a description goes by
    from . import describe
    describe.check(fmt, path, force, options)  # refused now, not after the data is written
    layout = describe.described(fmt, path)
    from contextlib import nullcontext
    from .io.fileio import hashed_outputs
    from .io.staging import one_commit
    with one_commit():  # the data and its description appear together or not at all
        # (a description listing each file's SHA-256: hashed as they are written)
        with hashed_outputs() if layout and layout.listed else nullcontext():
            written = contract.write(fmt, dataset, path, options, force=force,
                                     progress=progress or NO_PROGRESS)
        written.files.extend(describe.describe(dataset, path, written.files, fmt, options))
    return written


def convert(src: PathArg, dst: PathArg, from_: Optional[str] = None, to: Optional[str] = None,
            *, read_options: Optional[dict] = None, select: Optional[dict] = None,
            grayscale: bool = False, force: bool = False,
            progress: "Optional[Progress]" = None, **write_options: Any) -> "WriteResult":
    """read(src, from_, grayscale=grayscale, **read_options), then the selection
    `select` names if given (stream.select's keywords, and split_off, split_off_from and
    stratify: stream.split_off's, as the command line's --split-off), then
    write(dataset, dst, to, force=force, progress=progress, **write_options), and what
    it returns.

        mnistconv.convert("data/mnist", "mnist.npz")
        mnistconv.convert("cifar-images/", "grey.tfrecord", grayscale=True)
        mnistconv.convert("data/mnist", "small/", to="idx", gzip=True,
                          select={"splits": ["test"], "per_class": 10})
        mnistconv.convert("data/mnist", "mnist.npz",
                          select={"split_off": {"validation": 0.1}, "stratify": True})
    """
    from .model import stream
    if select:  # a misspelt key is a usage error naming the valid ones, not a TypeError
        import inspect
        valid = [p for p in inspect.signature(stream.select).parameters
                 if p != "dataset"] + list(stream.CARVE_KEYS)
        wrong = sorted(set(select) - set(valid))
        if wrong:
            raise UsageError(None, f"select takes no key '{wrong[0]}'",
                             f"it takes: {', '.join(valid)}")
    dataset = read(src, from_, grayscale=grayscale, **(read_options or {}))
    if select:
        dataset = stream.apply_selection(dataset, select)
    return write(dataset, dst, to, force=force, progress=progress, **write_options)
