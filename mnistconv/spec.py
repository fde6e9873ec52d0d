"""How a format declares itself: its name, extensions, kind of output and options.

Each format package under mnistconv/formats/ holds one `SPEC = Format(...)` in its
`__init__.py`, next to its code and importable without numpy or any codec, so listing
the formats, building the command line and `--help` stay light. The registry collects
the specs; the CLI, `mnistconv formats`, the documentation's format pages and option
validation all derive from them, so an option's type, choices, default and range are
written once.

    SPEC = Format("npz", "mnistconv.formats.npz", "numpy .npz in Keras' layout",
                  extensions=(".npz",),
                  write_options=(Option("compress", "--compress", "deflate the arrays"),))
"""

import functools
import importlib
from dataclasses import dataclass, field, make_dataclass
from types import ModuleType
from typing import Any, Optional

from .errors import BadOption, UsageError


@dataclass(frozen=True)
class Option:
    """One read or write option: the keyword argument `name` of read()/write(), its
    command-line `flag`, and what values it takes.

        Option("jpeg_quality", "--jpeg-quality", "JPEG quality", "int", default=95,
               low=1, high=100)
    """

    name: str  # keyword argument of read()/write()
    flag: str  # command-line flag
    help: str
    type: str = "flag"  # flag | int | float | str | choice | path
    choices: tuple = ()
    default: object = None
    low: Optional[float] = None  # int/float range, inclusive; None: unbounded
    high: Optional[float] = None

    def check(self, value: Any) -> Any:
        """The value if it is one this option takes, else the one-line UsageError every
        option gives in the same words (exit 2 on the command line)."""
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


@dataclass(frozen=True)
class Format:
    """A format's declaration (see the module docstring). `module` is imported only
    when the format is read or written: it provides sniff(path), read(path, **options),
    write(dataset, path, *, force, progress, **options) and may provide
    matches_name(path)."""

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
    # A single file does not record its split's name, which is then taken from the
    # file name (train-images-idx3-ubyte, conv3.bin, t.tfrecord) and noted as assumed.
    split_names_from_file_names: bool = False
    # The output is one file holding every split (npz): never a directory.
    output_is_one_file: bool = False
    # Compression suffixes an output name may end with, and the write option each
    # sets: {".gz": ("compression", "gzip")}. Kept after the split in the names
    # written (a shard suffix, TensorFlow's convention, comes after it).
    compression_suffixes: tuple = ()
    # The module whose prepare_write() writes one shard alone (mnistconv.contract), so
    # the format plans, resumes and runs on Beam; None when its writer cannot.
    sharded: Optional[str] = None

    def options(self, values: dict):
        """The write options as a frozen dataclass: every declared option (its default
        when not given or None) and processes, each checked once (Option.check).

            SPEC.options({"shards": 4}).shards  # 4
        """
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
        """Check option values given to read() (role "read") or write() ("write")
        against their declarations. A name that is neither declared nor a parameter of
        the format's function (a misspelling) is a UsageError naming the options."""
        declared = {o.name: o for o in (self.read_options if role == "read"
                                        else self.write_options)}
        if role == "write":  # the options dataclass takes these too
            declared.setdefault("processes", Option("processes", "", ""))
        for name, value in values.items():
            if name in declared:
                declared[name].check(value)
            elif name not in self._parameters(role):
                takes = ", ".join(declared) or "no options"
                raise UsageError(None, f"{role} {self.name} takes no option '{name}'",
                                 f"it takes: {takes}")

    def _parameters(self, role):
        import inspect
        function = getattr(self.load(), role)
        return inspect.signature(function).parameters


# A writer given no worker count encodes in the calling thread; workers=None asks for
# one per core (the command line's default).
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
