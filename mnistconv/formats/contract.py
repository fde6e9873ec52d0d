"""The write contract: how every runner (a shard plan, a task slice, --resume, Beam)
reaches a format's writer, through one door.

Every write, local or not, first passes admit(): the dataset's schema against what the
format declares it holds (spec.Holds), refused in one shared message before anything
is written.

A format whose writer can write one shard alone names a module in its spec
(`Format(..., sharded="mnistconv.formats.x.plan")`) holding
`prepare_write(dataset, path, options) -> ShardedWrite`, options being the frozen
dataclass Format.options() made, checked as a local write() checks them.
"""

import importlib
from abc import ABC, abstractmethod
from dataclasses import dataclass, fields
from typing import Any, ClassVar

from ..errors import CannotWrite, UsageError
from ..model.spec import CLASS, NO_TARGET
from ..model.records import OutputFile


@dataclass(frozen=True)
class ShardTarget:
    """One shard of a set: its split, index in the split, path and examples start..stop."""

    split: str
    index: int
    path: str
    start: int
    stop: int


@dataclass
class Counters:
    """What writing a shard counted: merge() sums each field (MAXED ones: the largest)."""

    MAXED: ClassVar[tuple] = ()

    def merge(self, other: "Counters") -> "Counters":
        """Self with other's counts added (in place); returns self."""
        for f in fields(self):
            mine, theirs = getattr(self, f.name), getattr(other, f.name)
            setattr(self, f.name, max(mine, theirs) if f.name in self.MAXED
                    else mine + theirs)
        return self

    def as_list(self) -> list:
        """The counts in field order (as a progress record holds them)."""
        return [getattr(self, f.name) for f in fields(self)]

    @classmethod
    def from_list(cls, values) -> "Counters":
        """Counters from as_list()'s values."""
        return cls(*values)

    @classmethod
    def size(cls) -> int:
        """How many numbers as_list() gives."""
        return len(fields(cls))


class ShardedWrite(ABC):
    """A prepared write of a shard set; stale: files of an earlier set it supersedes."""

    options: Any
    targets: list
    stale: list = []
    counters: "type[Counters]" = Counters

    def metadata_targets(self) -> list:
        """The files finish() writes beside the shards (none by default)."""
        return []

    @abstractmethod
    def write_shard(self, index: int, staged_path: str) -> "tuple[OutputFile, Counters]":
        """Write shard `index` at staged_path as a whole-set write would; its Counters."""

    def finish(self, recorded: dict) -> None:  # noqa: B027 (most sets have nothing to finish)
        """Write the set's metadata; recorded: {shard path: (OutputFile, Counters)}."""

    @abstractmethod
    def stats(self, counters: Counters) -> dict:
        """write()'s stats from every shard's counters, merged."""


def prepare_write(format_name: str, dataset, path, options: dict) -> ShardedWrite:
    """The one door: options, output name and dataset checked as write() does them."""
    from . import registry
    fmt = registry.get(format_name)
    path, values = checked_options(fmt, path, options)
    module = check_sharded(fmt)
    admit(fmt, dataset, values)
    return importlib.import_module(module).prepare_write(dataset, path, fmt.options(values))


def checked_options(fmt, path, options: dict):
    """(path, options) of a write, options checked and name resolved, for every runner."""
    from . import registry
    fmt.check_options(options, "write")
    return registry.resolve_output(path, fmt, options)


def check_sharded(fmt) -> str:
    """The module of fmt's sharded write, else a usage error naming those that have one."""
    if fmt.sharded is None:
        from . import registry
        able = ", ".join(f.name for f in registry.FORMATS.values() if f.sharded)
        raise UsageError(None, f"writing {fmt.name} cannot be planned, resumed or run "
                               "on Beam (its writer does not write one shard alone)",
                         f"plan one of: {able}")
    return fmt.sharded


def admit(fmt, dataset, options: Any = None) -> None:
    """The door every write passes, for every runner (write(), a plan, a task slice,
    --resume, Beam), before anything is written: class names cover the labels, and each
    split's schema is one the format holds with these options (fmt.holding). A
    CannotWrite otherwise, in one message: the format, what it cannot hold, the way out."""
    from ..codecs.classes import check_dataset
    check_dataset(dataset)
    holds = fmt.holding(options)
    schemas = [split.header.schema for split in dataset.splits.values()]
    sizes: dict = {}
    for split in dataset.splits.values():
        schema = split.header.schema
        where = split.header.source or split.name
        problem = cannot_hold(holds, schema)
        if problem is not None:
            what, held, needs = problem
            _refuse(fmt, where, f"split {split.name}'s {what} (it holds {held})", needs,
                    holds, [schema])
        if schema.image.channels is not None:
            sizes.setdefault(schema.image.shape[:2], split.name)
    if holds.one_image_size and len(sizes) > 1:
        shown = ", ".join(f"{name} {h}x{w}" for (h, w), name in sizes.items())
        _refuse(fmt, None, f"splits of different image sizes ({shown}) (it holds one "
                           "size for all splits)", "one_image_size", holds, schemas, True)


def cannot_hold(holds, schema) -> "tuple[str, str, str] | None":
    """(what of the schema the declaration cannot hold, what it holds instead, which
    part: channels, dtypes, targets, max_classes), or None when it holds all of it."""
    image, target = schema.image, schema.target
    table = holds.table()
    if holds.channels is not None and image.channels not in holds.channels:
        what = f"{image} images" if image.channels is not None else \
            f"images of shape {image.shape} (arrays, not H x W (x C) images)"
        return what, table["images"], "channels"
    if holds.dtypes is not None and image.dtype.name not in holds.dtypes:
        return f"{image.dtype.name} pixels", table["dtypes"], "dtypes"
    if target.kind not in holds.targets:
        what = {CLASS: "class target", NO_TARGET: "examples without a target"}.get(
            target.kind, f"multi-label target ({target.width} labels)")
        return what, table["targets"], "targets"
    if holds.max_classes and (target.classes or 0) > holds.max_classes:
        return (f"{target.classes} classes", f"at most {holds.max_classes}",
                "max_classes")
    return None


def _refuse(fmt, where, what, needs, holds, schemas, one_size=False):
    """The shared refusal: the ways out are an option that narrowed what the format
    holds, the formats that hold all of `schemas`, and a reduction where one exists."""
    from . import registry
    able = [f.name for f in registry.writers() if f is not fmt and
            all(cannot_hold(f.holds, s) is None for s in schemas) and
            not (one_size and f.holds.one_image_size)]
    ways, cli_ways = [], []
    if holds is not fmt.holds and all(cannot_hold(fmt.holds, s) is None for s in schemas):
        option, value = next((o, v) for o, v, h in fmt.holds_when if h is holds)
        flag = next(o.flag for o in fmt.write_options if o.name == option)
        ways.append(f"write it without {option}={value!r}")
        cli_ways.append(f"write it without {flag}" + ("" if value is True else f" {value}"))
    else:  # an option that widens what it holds (TFRecord's PNG holds RGB)
        for option, value, widened in fmt.holds_when:
            if widened is not holds and all(cannot_hold(widened, s) is None
                                            for s in schemas):
                flag = next(o.flag for o in fmt.write_options if o.name == option)
                ways.append(f"write it with {option}={value!r}")
                cli_ways.append(f"write it with {flag}" +
                                ("" if value is True else f" {value}"))
                break
    if able:
        ways.append(f"write it as {_one_of(able)}, which can")
        cli_ways.append(ways[-1])
    if needs == "channels" and holds.channels and 1 in holds.channels and \
            all(s.image.channels in (1, 2, 3, 4) and s.image.dtype.name == "uint8"
                for s in schemas):  # what stream.reduce_to_grayscale makes grey
        ways.append("read it with grayscale=True")
        cli_ways.append("make it grey with --grayscale")
    nothing = "no format mnistconv writes holds it"
    raise CannotWrite(where, f"{fmt.name} cannot hold {what}", ", or ".join(ways) or nothing,
                      cli_hint=", or ".join(cli_ways) or nothing)


def _one_of(names) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]
