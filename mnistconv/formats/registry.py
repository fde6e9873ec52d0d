"""The formats mnistconv reads and writes, found by name or detected from a path.

Each format declares itself in a light SPEC (spec.Format) naming its code module, which
is imported on first use, so listing formats and `--help` import no codec.
"""

import importlib
import os
from typing import Any

from ..errors import MnistconvError, NotFound, UsageError
from ..model.spec import Format, Option  # noqa: F401  (re-exported: registry.Option, .Format)


FORMAT_PACKAGES = (
    "mnistconv.formats.idx",
    "mnistconv.formats.kmnist",  # before npz: its files are zip archives too
    "mnistconv.formats.medmnist",  # (and MedMNIST's)
    "mnistconv.formats.npz",
    # before gdmnist: both read .bin files; a damaged CIFAR file is CIFAR's by name
    "mnistconv.formats.cifar",
    "mnistconv.formats.cifar_python",
    "mnistconv.formats.svhn",
    "mnistconv.formats.gdmnist",
    "mnistconv.formats.tfds",
    "mnistconv.formats.arrayrecord",
    "mnistconv.formats.parquet",
    "mnistconv.formats.webdataset",
    "mnistconv.formats.imagefolder",
    "mnistconv.formats.caffe_lmdb",
    "mnistconv.formats.caffe_hdf5",
    "mnistconv.formats.quickdraw",
    "mnistconv.formats.tfrecord",
)

FORMATS: dict = {}


def register(fmt: Format) -> Format:
    """Add a format's declaration (its SPEC) to FORMATS, under its name; returns it."""
    FORMATS[fmt.name] = fmt
    return fmt


def get(name: str) -> Format:
    """The format of that name, or a UsageError listing the known ones."""
    if name not in FORMATS:
        raise UsageError(None, f"unknown format '{name}'",
                         f"choose one of: {', '.join(FORMATS)}")
    return FORMATS[name]


def readers() -> list[Format]:
    """The formats mnistconv reads, in registry order (the order detection tries)."""
    return [f for f in FORMATS.values() if f.can_read]


def writers() -> list[Format]:
    """The formats mnistconv writes, in registry order."""
    return [f for f in FORMATS.values() if f.can_write]


# Files people give by mistake, by their first bytes: said for what they are.
_NOT_DATASETS = ((b"\xff\xd8\xff", "a JPEG image"), (b"\x89PNG", "a PNG image"),
                 (b"GIF8", "a GIF image"), (b"%PDF", "a PDF document"),
                 (b"BZh", "a bzip2 file"), (b"\xfd7zXZ", "an xz file"),
                 (b"\x28\xb5\x2f\xfd", "a zstd file"))


def _what_it_is(path):
    """'a JPEG image', 'text', ... for a file that is no dataset, or None."""
    try:
        from ..io.fileio import open_input
        with open_input(path) as f:
            head = f.read(512)
    except OSError:
        return None
    for magic, what in _NOT_DATASETS:
        if head.startswith(magic):
            return what
    if not head:
        return "empty"
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return "text" if all(c.isprintable() or c in "\r\n\t" for c in text) else None


def _unrecognized(path, from_flag):
    reads = ", ".join(f.name for f in readers())
    what = None if os.path.isdir(path) else _what_it_is(path)
    if what == "empty":
        return UsageError(path, "is empty, not a dataset",
                          "check the path, or download or copy the file again")
    if what:
        return UsageError(path, f"is {what}, not a dataset",
                          f"mnistconv reads {reads} (see `mnistconv formats`)")
    return UsageError(path, f"not a dataset mnistconv recognizes (it reads {reads})",
                      f"if it is one of these under another name, say which with "
                      f"{from_flag}")


def detect_input(path: str, from_flag: str = "--from") -> Format:
    """The format of an input, by content first, then by name (`from_flag` for messages)."""
    if str(path) == "-":
        raise UsageError("-", "cannot detect the format of stdin",
                         f"name it with {from_flag}")
    if not os.path.exists(path):
        fmt = _format_of_written_name(path)
        if fmt is None:
            raise NotFound(path, "no such file or directory")
        return fmt
    if not os.path.isdir(path) and not os.path.isfile(path):
        # Sniffing reads a file's first bytes: opening a FIFO blocks until a writer comes.
        raise UsageError(path, "is not a regular file (device, FIFO or socket)",
                         "name a regular file or a directory")
    for fmt in readers():
        if fmt.load().sniff(path):
            return fmt
    for fmt in readers():
        if fmt.matches_name(path):
            return fmt
    raise _unrecognized(path, from_flag)


def _format_of_written_name(path):
    """The format whose writer, given this name, wrote files that are there, or None."""
    for fmt in readers():
        resolve = getattr(fmt.load(), "resolve", None) if fmt.matches_name(path) else None
        if resolve is not None:
            try:
                resolve(path)
            except MnistconvError:
                continue
            return fmt
    return None


def names_a_directory(path: str) -> bool:
    """Ends in '/', is a directory, or has no extension and does not exist."""
    path = str(path)
    name = os.path.basename(path.rstrip(os.sep))
    return path.endswith(os.sep) or os.path.isdir(path) or \
        ("." not in name.lstrip(".") and not os.path.lexists(path))


def detect_output(path: str) -> Format:
    """The format an output name says: its extension, or IDX for a directory."""
    for fmt in writers():
        if not fmt.output_is_directory and fmt.matches_name(path):
            return fmt
    if names_a_directory(path):
        return get("idx")
    raise UsageError(path, "cannot tell the output format from the name",
                     f"name it with --to ({', '.join(f.name for f in writers())})")


_ALL_COMPRESSION_SUFFIXES = (".gz", ".zz", ".zlib", ".xz", ".bz2", ".zst")


def resolve_output(path: Any, fmt: Format, options: dict) -> tuple[Any, dict]:
    """The one rule for output names, for every writer: (path, options). A compression
    suffix the format knows selects it (any other is refused); another format's
    extension is refused; a name without one that does not exist is a directory."""
    from ..io.fileio import is_stream_path
    if is_stream_path(path):
        return str(path), options
    path = str(path)
    options = dict(options)
    name = os.path.basename(path.rstrip(os.sep))
    core = name.lower()
    for suffix, (option, value) in dict(fmt.compression_suffixes).items():
        if core.endswith(suffix) and len(core) > len(suffix):
            if options.get(option) not in (None, False, "none", value):
                flag = next((o.flag for o in fmt.write_options if o.name == option), option)
                raise UsageError(path, f"the name says {suffix} but {flag} "
                                       f"says {options[option]}",
                                 "make them agree, or drop one")
            options[option] = value
            core = core[:-len(suffix)]
            break
    else:
        for suffix in _ALL_COMPRESSION_SUFFIXES:
            if core.endswith(suffix) and len(core) > len(suffix):
                known = ", ".join(s for s, _ in fmt.compression_suffixes)
                raise UsageError(path, f"{fmt.name} output does not take a {suffix} "
                                       "suffix", f"it takes {known}" if known else
                                 _compression_hint(fmt))
    ext = os.path.splitext(core)[1]
    if ext and ext not in fmt.extensions:
        for other in writers():
            if other is not fmt and any(e.split(".")[-1] == ext[1:]
                                        for e in other.extensions):
                stem = name[:len(core) - len(ext)]
                better = f"name it {stem}{fmt.extensions[0]}" if fmt.extensions else \
                    f"name a directory such as {stem}/"
                raise UsageError(path, f"the name says {other.name} ({ext}), but the "
                                       f"output format is {fmt.name}",
                                 f"write {other.name} with format='{other.name}', or "
                                 f"{better}",
                                 cli_hint=f"write {other.name} with --to {other.name} or "
                                          f"a *-to-{other.name} command, or {better}")
    if names_a_directory(path):
        if fmt.output_is_one_file:
            raise UsageError(path, f"{fmt.name} writes one file holding every split, "
                                   "not a directory",
                             f"name the file, e.g. {name or 'out'}{fmt.extensions[0]}")
        if not path.endswith(os.sep):
            path += os.sep
    return path, options


def _compression_hint(fmt):
    flags = [o.flag for o in fmt.write_options if o.name in ("gzip", "compress")]
    return f"use {flags[0]} instead" if flags else "name the output without it"


for _package in FORMAT_PACKAGES:
    register(importlib.import_module(_package).SPEC)
