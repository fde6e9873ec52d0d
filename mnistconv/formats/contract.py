"""The write contract: every write, local or planned, drives a format's ShardedWrite.

A format's writer is `prepare_write(dataset, path, options) -> ShardedWrite`, found in
the module its spec names (`Format(..., writer="mnistconv.formats.x.writer")`; without
one, the format's own module), options being the frozen dataclass Format.options()
made. The job says its shard targets (each a split's examples start..stop and the path
of its file) and the files of an earlier set it supersedes (stale); what is the
format's own is write_targets(targets, paths): consecutive targets of one split from
one pass over their examples, the only code that makes its bytes. write_shard(i,
staged_path) writes shard i through it: alone for a plan, with the rest of its split
in a local run (the split read once).

write() below is every local write: the door (options, then admit()), the job, its
targets and stale files staged under one StagedOutput, every target written in order
with progress per split, then finish() (metadata beside the shards) and the result.
What shards share within one run (an encoder pool) is the job's shared(), opened once
per run by session(); a shard written alone opens its own.

Plans, task slices, --resume and Beam (mnistconv.runners) drive the same job one shard
at a time, so they need `Format(..., plannable=True)`: each shard's bytes depend on its
own examples only. A format whose shards follow each other's bytes (WebDataset cut by
bytes, TFDS' shard count from the encoded size) or that writes one file of every split
is written only in order, by write(); its job may refuse options a plan cannot honour
in check_plannable().

Every write, local or not, passes admit(): the dataset's schema against what the format
declares it holds (spec.Holds), refused in one shared message before anything is
written.
"""

import importlib
import itertools
import os
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, fields
from typing import Any, ClassVar, Iterator

from ..errors import CannotWrite, UsageError
from ..model.spec import CLASS, NO_TARGET
from ..model.records import NO_PROGRESS, Progress, WriteResult


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
    """What writing a shard counted, the one convention of every format: `records` (the
    examples it holds: write()'s counts per split), then the format's own fields.
    merge() sums each field (MAXED ones: the largest)."""

    MAXED: ClassVar[tuple] = ()
    records: int = 0

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


class _Within(Progress):
    """A run's progress as a shard's writer hears it: it advances and sizes its reads
    (step, batch); the driver says where each split starts and finishes."""

    def __init__(self, progress: Progress):
        self.advance = progress.advance  # type: ignore[method-assign]
        self.step, self.batch = progress.step, progress.batch


class ShardedWrite:
    """A prepared write of a shard set; stale: files of an earlier set it supersedes."""

    options: Any
    targets: list
    stale: list = []
    counters: "type[Counters]" = Counters
    # Within a session: what shared() opened, and the run's progress (advance(n) for
    # records written: a writer's own loop calls it; iter_batches and the like take
    # `progress`, whose start and finish the driver says).
    pool: Any = None
    progress: Progress = NO_PROGRESS
    _in_session = False

    def __init_subclass__(cls, **kwargs):
        # A job writes either shard by shard (write_shard) or a split's run of shards
        # from one pass (write_targets); one that does neither is refused where it is
        # declared, not halfway through a write.
        super().__init_subclass__(**kwargs)
        if cls.write_shard is ShardedWrite.write_shard and \
                cls.write_targets is ShardedWrite.write_targets:
            raise TypeError(f"{cls.__name__} defines neither write_shard nor write_targets")

    def advance(self, n: int) -> None:
        """n more records written (the session's progress hears it)."""
        self.progress.advance(n)

    def shared(self, records: int) -> Any:
        """A context manager of what every shard of one run shares (an encoder pool for
        `records` examples); nothing by default."""
        return nullcontext()

    @contextmanager
    def session(self, records: int, progress: Progress = NO_PROGRESS) -> Iterator:
        """shared(), opened once for the shards written within, which report to
        progress; inside a session already, that one serves (write_shard opens one: a
        shard alone has its own)."""
        if self._in_session:
            yield self.pool
            return
        with self.shared(records) as pool:
            self.pool, self.progress, self._in_session = pool, _Within(progress), True
            try:
                yield pool
            finally:
                self.pool, self.progress, self._in_session = None, NO_PROGRESS, False

    def stage(self, staged, target: ShardTarget) -> str:
        """Where a local write writes target (staged: its StagedOutput): a file beside it."""
        path = staged.file(target.path)
        self.__dict__.setdefault("_staged", {})[target.path] = path
        return path


    def check_plannable(self) -> None:  # noqa: B027 (most jobs plan whatever their options)
        """Refuse options a plan cannot honour (a UsageError), before any task runs."""

    def outputs(self) -> list:
        """Every file a local write of this job makes, named from the headers, no image
        read (--list-outputs): its targets' files, then the metadata. A job whose names
        follow the encoded bytes raises a UsageError saying so."""
        return list(dict.fromkeys([t.path for t in self.targets] +
                                  [str(t) for t in self.metadata_targets()]))

    def metadata_targets(self) -> list:
        """The files finish() writes beside the shards (none by default)."""
        return []

    def write_shard(self, index: int, staged_path: str) -> "tuple[Any, Counters]":
        """Write shard `index` at staged_path: its OutputFile (a list when the shard is
        several files: a local write's side files) and Counters. In a local run (stage()
        placed every target of its split) the split's first shard writes them all, its
        examples read once; a plan's shard is written alone. Same bytes either way."""
        target = self.targets[index]
        done = self.__dict__.setdefault("_done", {})
        if target.path not in done:
            staged = self.__dict__.get("_staged", {})
            mine = [t for t in self.targets if t.split == target.split]
            if all(t.path in staged for t in mine):
                done.update(self.write_targets(mine, {t.index: staged[t.path] for t in mine}))
            else:
                done.update(self.write_targets([target], {target.index: staged_path}))
        return done.pop(target.path)

    def write_targets(self, targets: list, paths: dict) -> dict:
        """Write consecutive targets of one split at paths ({index: staged path}) from
        one pass over their examples: {target path: (OutputFile(s), Counters)}. A job
        that defines write_shard instead never comes here (__init_subclass__)."""
        return {}

    def finish(self, recorded: dict, staged) -> list:
        """Write the set's metadata staged in `staged` (a StagedOutput); recorded: {shard
        path: (OutputFile, Counters)}. The OutputFiles it wrote (none by default)."""
        return []

    def stats(self, counters: Counters) -> dict:
        """write()'s stats from every shard's counters, merged (none by default)."""
        return {}


def writer_module(fmt) -> Any:
    """The module holding fmt's prepare_write (the spec's `writer`, else its module)."""
    return importlib.import_module(fmt.writer or fmt.module)


def write(fmt, dataset, path, options: dict, *, force: bool = False,
          progress=NO_PROGRESS) -> WriteResult:
    """Every format's local write: options checked and the output named, the dataset
    admitted, the job prepared, its targets (and the stale files they supersede) staged
    under one StagedOutput, each target written in order with progress per split, the
    set finished. The files in order (shards, then metadata), the records per split and
    the job's stats of every shard's counters merged."""
    from ..io.fileio import StagedOutput, exists_error
    path, values = checked_options(fmt, path, options)
    admit(fmt, dataset, values)
    job = writer_module(fmt).prepare_write(dataset, path, fmt.options(values))
    files, recorded, counts, totals = [], {}, {}, job.counters()
    with StagedOutput(force, root=str(path)) as staged:
        staged_paths = [job.stage(staged, t) for t in job.targets]
        for stale in job.stale:
            staged.supersede(stale)
        for later in job.metadata_targets():  # refused now, not once the data is written
            if not force and os.path.lexists(later):
                raise exists_error(later)
        numbered = list(enumerate(job.targets))
        with job.session(sum(t.stop - t.start for t in job.targets), progress):
            for split, group in itertools.groupby(numbered, lambda e: e[1].split):
                group = list(group)
                progress.start(f"{split} -> {fmt.name}",
                               sum(t.stop - t.start for _, t in group))
                split_total = job.counters()
                try:
                    for i, target in group:
                        written, counters = job.write_shard(i, staged_paths[i])
                        shard_files = written if isinstance(written, list) else [written]
                        if shard_files:  # (none: a later target completes the file)
                            recorded[target.path] = (shard_files[0], counters)
                        files += shard_files
                        split_total.merge(counters)
                finally:
                    progress.finish()
                counts[split] = split_total.records
                totals.merge(split_total)
        files += job.finish(recorded, staged)
    return WriteResult(files, counts, job.stats(totals))


def prepare_write(format_name: str, dataset, path, options: dict) -> ShardedWrite:
    """The plans' door: options, output name and dataset checked as write() does them,
    the format one that plans, the job's options ones a plan honours."""
    from . import registry
    fmt = registry.get(format_name)
    path, values = checked_options(fmt, path, options)
    check_sharded(fmt)
    admit(fmt, dataset, values)
    job = writer_module(fmt).prepare_write(dataset, path, fmt.options(values))
    job.check_plannable()
    return job


def checked_options(fmt, path, options: dict):
    """(path, options) of a write, options checked and name resolved, for every runner."""
    from . import registry
    fmt.check_options(options, "write")
    return registry.resolve_output(path, fmt, options)


def check_sharded(fmt) -> None:
    """Nothing when fmt's shards can be written alone, else a usage error naming the
    formats whose can."""
    if not fmt.plannable:
        from . import registry
        able = ", ".join(f.name for f in registry.FORMATS.values() if f.plannable)
        raise UsageError(None, f"writing {fmt.name} cannot be planned, resumed or run "
                               "on Beam (its writer does not write one shard alone)",
                         f"plan one of: {able}")


def admit(fmt, dataset, options: Any = None) -> None:
    """The door every write passes, for every runner (write(), a plan, a task slice,
    --resume, Beam), before anything is written: class names cover the labels, and each
    split's schema is one the format holds with these options (fmt.holding). A
    CannotWrite otherwise, in one message: the format, what it cannot hold, the way out.
    In the program, malloc is fitted to the images the write will make batches of."""
    from ..codecs.classes import check_dataset
    check_dataset(dataset)
    _fit_heap(dataset)
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


def _fit_heap(dataset) -> None:
    """The program's malloc tuned to the largest image this write will make batches of
    (workers.process.fit_heap_to_images)."""
    from ..io.budget import image_bytes
    from ..workers.process import fit_heap_to_images
    images = [split.header.schema.image for split in dataset.splits.values()]
    fit_heap_to_images(max((image_bytes(i.shape, i.dtype) for i in images), default=0))


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
