"""The write contract: how every runner (a shard plan, a task slice, --resume, Beam)
reaches a format's writer, through one door.

A format whose writer can write one shard alone names a module in its spec
(`Format(..., sharded="mnistconv.formats.x.plan")`) holding
`prepare_write(dataset, path, options) -> ShardedWrite`, options being the frozen
dataclass Format.options() made, checked as a local write() checks them.
"""

import importlib
from abc import ABC, abstractmethod
from dataclasses import dataclass, fields
from typing import Any, ClassVar

from .errors import UsageError
from .records import OutputFile


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
    from .codecs.classes import check_dataset
    check_dataset(dataset)
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
