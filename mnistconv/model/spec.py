"""How a format declares itself: its name, extensions, kind of output and options.

Each format package holds one `SPEC = Format(...)` in its `__init__.py`, importable
without numpy or any codec. The CLI, `mnistconv formats`, the docs' format pages and
option validation all derive from it, so an option is written once.
"""

import functools
import importlib
import inspect
from dataclasses import dataclass, field, make_dataclass
from types import ModuleType
from typing import Any, Optional

from ..errors import BadOption, UsageError


@dataclass(frozen=True)
class Option:
    """One read or write option: keyword `name`, command-line `flag`, values it takes."""

    name: str  # keyword argument of read()/write()
    flag: str  # command-line flag
    help: str
    type: str = "flag"  # flag | int | float | str | choice | path
    choices: tuple = ()
    default: object = None
    low: Optional[float] = None  # int/float range, inclusive; None: unbounded
    high: Optional[float] = None

    def check(self, value: Any) -> Any:
        """The value if this option takes it, else a BadOption in every option's words."""
        if value is None:
            return value
        if self.type == "choice" and value not in self.choices:
            raise BadOption(None, f"{self.flag} must be one of {', '.join(self.choices)}, "
                                   f"not {value!r}")
        if self.type in ("int", "float"):
            kind = int if self.type == "int" else (int, float)
            if isinstance(value, bool) or not isinstance(value, kind):
                raise BadOption(None, f"{self.flag} must be a number, not {value!r}")
            if (self.low is not None and value < self.low) or \
                    (self.high is not None and value > self.high):
                raise BadOption(None, f"{self.flag} must be {self._range()}, not {value}")
        return value

    def _range(self):
        if self.low is not None and self.high is not None:
            return f"between {self.low} and {self.high}"
        return f"{self.low} or more" if self.low is not None else f"{self.high} or less"


# Target kinds a format may hold (schema.CLASS, MULTILABEL, NO_TARGET; spelled here so
# a SPEC imports no numpy).
CLASS, MULTILABEL, NO_TARGET = "class", "multilabel", "none"
GREY, RGB, RGBA = (1,), (3,), (4,)


@dataclass(frozen=True)
class Holds:
    """What a format can hold, declared in its SPEC; contract.admit compares every
    split's schema with it before anything is written, and `mnistconv formats` shows it.

        Holds(channels=(1, 3), dtypes=("uint8",), extras=True)
    """

    # Channel counts of H x W (x C) images: 1 grey, 3 RGB, 4 RGBA. None: arrays of any
    # shape (IDX, npz).
    channels: Optional[tuple] = GREY
    # Pixel types by numpy name. None: any numpy type.
    dtypes: Optional[tuple] = ("uint8",)
    targets: tuple = (CLASS,)
    # Keeps named per-example extra columns (QMNIST's); else they are dropped, noted.
    extras: bool = False
    # Every split the same image size (one features.json); else each split its own.
    one_image_size: bool = False
    # The most classes a label can name (GDMNIST1's uint8 labels: 256). None: no limit
    # beyond mnistconv's own (limits.MAX_CLASSES).
    max_classes: Optional[int] = None

    def table(self) -> dict:
        """The declaration as `mnistconv formats` and the format pages show it."""
        names = {1: "grey", 2: "grey+alpha", 3: "RGB", 4: "RGBA"}
        return {
            "images": "any array" if self.channels is None else
            ", ".join(names.get(c, f"{c} channels") for c in self.channels),
            "dtypes": "any" if self.dtypes is None else ", ".join(self.dtypes),
            "targets": ", ".join("multi-label" if t == MULTILABEL else t
                                 for t in self.targets)
            + (f" (at most {self.max_classes} classes)" if self.max_classes else ""),
            "extras": "kept" if self.extras else "dropped",
            "image size": "one for all splits" if self.one_image_size else "per split",
        }


@dataclass(frozen=True)
class Described:
    """What a description of a format's folder output (croissant.json, describe/) says of
    its files, declared in its SPEC so the describer names no format:

        Described("Hugging Face Parquet", "{folder}/{split}-*-of-*{suffix}",
                  ((".parquet", "application/x-parquet"),), listed=True, records="table")

    `files`: a split's files, a glob from the output's root ({split} its name; {folder}
    and {suffix} taken from its first file); `media`: (suffix, MIME type) of the files,
    the first the default; `listed`: each file also listed with its size and SHA-256;
    `records`: "table" (image and label columns) or "images" (an image per file, its
    label the number of its class folder, its index the file's name)."""

    called: str  # the output in prose: "..., as <called>."
    files: str
    media: tuple
    listed: bool = False
    records: str = "images"


@dataclass(frozen=True)
class Format:
    """A format's declaration; `module`, imported on first use, provides sniff(path),
    read(path, **options) and maybe matches_name; `writer` (else `module`) provides
    prepare_write(dataset, path, options), which mnistconv.formats.contract drives."""

    name: str
    module: str
    description: str
    extensions: tuple = ()  # detection by name, e.g. (".npz",)
    read_options: tuple = ()
    write_options: tuple = ()
    can_read: bool = True
    can_write: bool = True
    stdio: bool = False  # '-' works (a single stream)
    output_is_directory: bool = False
    # A file records no split name: it is taken from the file name, noted as assumed.
    split_names_from_file_names: bool = False
    # The output is one file holding every split (npz): never a directory.
    output_is_one_file: bool = False
    # Compression suffixes an output name may end with, and the write option each sets:
    # ((".gz", ("compression", "gzip")),).
    compression_suffixes: tuple = ()
    # The module holding prepare_write() (mnistconv.formats.contract; None: `module`),
    # and whether its shards can be written alone: planned, sliced, resumed, on Beam.
    writer: Optional[str] = None
    plannable: bool = False
    # What the output can hold (contract.admit checks it) with the default options, and
    # what it holds instead when an option says otherwise: ((option, value, Holds), ...).
    holds: Holds = Holds()
    holds_when: tuple = ()
    # A folder output gets a description (croissant.json) saying this of its files.
    described: Optional[Described] = None

    def holding(self, options: Any = None) -> Holds:
        """What the output holds with these write options (a dict or the options
        dataclass; None: the defaults)."""
        for name, value, holds in self.holds_when:
            given = options.get(name) if isinstance(options, dict) else \
                getattr(options, name, None)
            if given == value:
                return holds
        return self.holds

    def options(self, values: dict):
        """The write options as a frozen dataclass, checked once (None: the default)."""
        return _options_class(self)(**values)

    def load(self) -> ModuleType:
        """The module with sniff/read/write (imported here, on first use)."""
        return importlib.import_module(self.module)

    def matches_name(self, path: str) -> bool:
        """Whether the name says this format (detection by name, after content)."""
        module = self.load()
        if hasattr(module, "matches_name"):
            return module.matches_name(path)
        return str(path).lower().endswith(self.extensions) if self.extensions else False

    def check_options(self, values: dict, role: str) -> None:
        """Check option values given to read() or write() (role "read" or "write")."""
        declared = {o.name: o for o in (self.read_options if role == "read"
                                        else self.write_options)}
        if role == "write":  # the options dataclass takes these too
            declared.setdefault("processes", Option("processes", "", ""))
        for name, value in values.items():
            if name in declared:
                declared[name].check(value)
            elif role == "write" or \
                    name not in inspect.signature(self.load().read).parameters:
                takes = ", ".join(declared) or "no options"
                raise UsageError(None, f"{role} {self.name} takes no option '{name}'",
                                 f"it takes: {takes}")


# A writer given no worker count encodes in the calling thread (None: one per core).
LIBRARY_WORKERS = 1


@functools.lru_cache(maxsize=None)
def _options_class(fmt: Format):
    """The frozen dataclass of fmt's write options (Format.options)."""
    declared = {o.name: o for o in fmt.write_options}
    defaults = {o.name: LIBRARY_WORKERS if o.name == "workers" else o.default
                for o in fmt.write_options}

    def post_init(self):
        for name, option in declared.items():
            value = getattr(self, name)
            if value is None and name != "workers":  # not given: the default
                object.__setattr__(self, name, defaults[name])
            else:
                option.check(value)

    return make_dataclass(
        f"{fmt.name.title()}Options",
        [(n, object, field(default=d)) for n, d in defaults.items()]
        + [("processes", bool, field(default=False))],
        namespace={"__post_init__": post_init,
                   "__doc__": f"{fmt.name}'s write options, checked (Format.options)."},
        frozen=True)
