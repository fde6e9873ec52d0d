"""Shard plans: a sharded conversion as independent tasks, run in any order, on any
machines, resumed after a crash, with the same bytes as one local run.

A plan has one task per shard of the format's ShardedWrite (mnistconv.formats.contract); its
hash covers the format, the options that change bytes, each split's header and a digest
of everything read (images, labels, indices, extra fields), and the tasks. A task
writes its shard staged, then notes its bytes, SHA-256 and counters in the progress
record (record_path: `.mnistconv-plan.json` inside a folder output, so the run leaves
nothing outside the folder the user named; `.<output>.mnistconv-plan.json` beside a
file output), under a flock on the folder it is in.
A record of another plan is refused unless force; resume keeps a shard whose file,
hashed again, matches. The task that completes the set checks every shard, finishes it
once (the format's finish, then the describe step every runner takes) and records the
metadata files it wrote; a later --resume checks those too and
writes again any that are missing or changed. Everything read back (the record, the
shards, the metadata) goes through fileio.open_output_file: a link, a FIFO or a device
there is refused in one line, and the record is read up to a size its plan allows.

An output URL (mnistconv.io.location) is a folder of a store (remote.Store): the format
writes each shard into a private local folder, from which it is uploaded; the record
is an object of the store where it is for a local path (inside a folder output, else
beside); nothing is written in the working folder. A store has
no lock: two slices that record at once may lose one's entry, which the finishing step
then finds missing (a --resume writes that shard again). Beam's finishing step takes
the entries from the tasks themselves. This module names no format.

A PlanRun holds one plan's run in a process: its job (the ShardedWrite, built once)
and its progress record; run() drives it here, beam.py on Beam.
"""

import contextlib
import hashlib
from dataclasses import dataclass
import json
import os

import numpy as np

from .. import describe
from ..formats.contract import checked_options, prepare_write
from ..io.fileio import StagedOutput
from ..io.written import OutputFile
from ..errors import BadOption, FormatError, UsageError
from ..limits import parse_json
from ..io.location import SetFolder
from ..io.staging import exists_error

PLAN_VERSION = 1
# The record's name inside a folder output, its name's end beside a file output: hidden,
# so a reader of the folder (mnistconv's, a tree walk that skips dot files) passes over it.
RECORD_SUFFIX = ".mnistconv-plan.json"
# Write options that change how fast, never what is written.
_NOT_PLANNED = ("workers", "processes")


class InputSpec:
    """How every task opens the same input (picklable, for Beam workers): path, format,
    read options, a selection (stream.select's keywords) and the read-side limits in
    effect where it is made (--max-image-size, --timeout), applied by every worker."""

    def __init__(self, path, format=None, read_options=None, select=None, limits=None):
        from .. import limits as cap
        from ..io import remote
        self.path, self.format = str(path), format
        self.read_options, self.select = dict(read_options or {}), select
        self.limits = dict(limits) if limits is not None else {
            "max_image_pixels": cap.MAX_IMAGE_PIXELS, "timeout": remote.current_timeout()}

    def open(self):
        """The dataset, read and selected under the spec's limits (the image cap stays set)."""
        import mnistconv
        from ..io import remote
        from ..limits import set_max_image_pixels
        set_max_image_pixels(self.limits["max_image_pixels"])
        with remote.timeout(self.limits["timeout"]):
            dataset = mnistconv.read(self.path, self.format, **self.read_options)
        if self.select is not None:
            from ..model import stream
            dataset = stream.apply_selection(dataset, self.select)
        return dataset


def _digest(array):
    # Hashed in place, a million at a time: memory stays flat however many images.
    array = np.ascontiguousarray(array)
    digest = hashlib.sha256(array.dtype.str.encode())
    flat = array.reshape(-1)
    for start in range(0, len(flat), 1 << 20):
        digest.update(flat[start:start + (1 << 20)])
    return digest.hexdigest()


def _content_digest(split) -> str:
    """SHA-256 of everything a split yields (each batch's images, then its extra fields),
    a batch at a time: a changed pixel is a changed plan, so --resume never keeps shards
    of another input beside shards of this one."""
    from ..model.stream import extra_fields
    digest = hashlib.sha256()
    for batch in split.batches():
        images = np.ascontiguousarray(batch.images)
        digest.update(f"{images.dtype.str}{images.shape[1:]}".encode())
        digest.update(images.reshape(-1).view(np.uint8).data)
    extra = extra_fields(split)
    if extra is not None:
        names, table = extra
        digest.update(json.dumps([str(n) for n in names]).encode())
        digest.update(_digest(np.asarray(table)).encode())
    return digest.hexdigest()


def make_plan(dataset, path, format_name, options) -> dict:
    """The plan of writing dataset to path as format_name with options; nothing is
    written. plan["output"] is path as write() names it."""
    with PlanRun(dataset, path, format_name, options) as run:
        return run.plan


def is_folder_output(fmt, path) -> bool:
    """Whether the output is a folder (its files inside it), by write()'s rule and the
    one SHA256SUMS follows: the format writes folders, or the name is one."""
    from ..formats import registry
    return fmt.output_is_directory or registry.names_a_directory(str(path))


def record_path(path, folder=False) -> str:
    """The progress record of a local output: `<path>/.mnistconv-plan.json` inside a
    folder output (folder=True), so that a planned run writes nothing outside the folder
    the user named; `.<name>.mnistconv-plan.json` beside a file output (a TFRecord or
    WebDataset shard set named by a file name), whose shards are beside it too."""
    if folder:
        return os.path.join(os.path.abspath(str(path)), RECORD_SUFFIX)
    parent, name = os.path.split(os.path.abspath(str(path)))
    return os.path.join(parent, f".{name}{RECORD_SUFFIX}")


def _record_limit(plan, counters) -> int:
    """The most bytes a record of this plan can hold: the plan, and per task a shard
    entry (its name, 20-digit numbers, a hash) and its metadata, with room to spare.
    A larger file is not read (a record linked to /dev/zero took gigabytes)."""
    per_task = 1024 + 32 * counters
    return 2 * len(json.dumps(plan, indent=1)) + per_task * len(plan["tasks"]) + (64 << 10)


def _whole(entry, counters) -> bool:
    """A shard's entry as run_task writes it: bytes, SHA-256 and `counters` numbers."""
    def number(n):
        return type(n) is int and n >= 0
    return isinstance(entry, dict) and number(entry.get("bytes")) and \
        isinstance(entry.get("sha256"), str) and isinstance(entry.get("counters"), list) \
        and len(entry["counters"]) == counters and all(map(number, entry["counters"]))


def _entry(written, counters) -> dict:
    return {"bytes": written.bytes, "sha256": written.sha256,
            "counters": counters.as_list()}


@dataclass(frozen=True)
class Tasks:
    """Which tasks of a plan a run takes (task_index, task_index + num_tasks, ...) and
    how: resume keeps intact shards, force starts over."""

    num_tasks: int = 1
    task_index: int = 0
    resume: bool = False
    force: bool = False


class PlanRun:
    """A plan's run in this process: the plan, its job (the format's ShardedWrite, built
    once, here) and its progress record. Made from the conversion (the plan then made
    from the job), or from a plan made elsewhere (PlanRun.of: a Beam worker's, a test's).
    A context manager: a store output's private folder goes at its end.

        with PlanRun(dataset, "out/m.tfrecord", "tfrecord", {"shards": 8}) as run:
            run.prepare()
            for number in range(len(run.plan["tasks"])):
                run.run_task(number)
            run.finish()
    """

    def __init__(self, dataset, path, format_name, options, plan=None):
        from ..formats import registry
        self.dataset, self.fmt, self.named = dataset, registry.get(format_name), str(path)
        fmt = self.fmt
        self.place = SetFolder(path, lambda local: record_path(
            local, is_folder_output(fmt, local)))
        try:
            # write()'s rule for output names, so every runner writes the local run's tree.
            self.path, resolved = checked_options(self.fmt, self.place.path, options)
            self.job = prepare_write(format_name, dataset, self.path, resolved)
            self.plan = self._made() if plan is None else plan
        except BaseException:
            self.place.__exit__(None, None, None)
            raise

    @classmethod
    def of(cls, dataset, plan, path=None, workers=1, processes=False) -> "PlanRun":
        """The run of a plan made elsewhere, at path (default: the plan's output),
        encoding on `workers`."""
        return cls(dataset, plan["output"] if path is None else path, plan["format"],
                   dict(plan["options"], workers=workers, processes=processes), plan)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.place.__exit__(*exc)

    def _made(self) -> dict:
        """The plan of this run's job; nothing is written."""
        dataset, job = self.dataset, self.job
        defaults = {o.name: o.default for o in self.fmt.write_options}
        # Only what differs from the defaults: the library's call and the command line's
        # (every default passed) get the same hash.
        options = {k: v for k, v in sorted(vars(job.options).items()) if k not in _NOT_PLANNED
                   and v is not None and v is not False and v != defaults.get(k)}
        splits, tasks = {}, []
        for t in job.targets:
            if t.split not in splits:
                split = dataset.splits[t.split]
                h = split.header
                splits[t.split] = {"count": h.count, "shape": list(h.shape),
                                   "dtype": str(h.dtype),
                                   "labels_sha256": _digest(split.labels()),
                                   "indices_sha256": _digest(split.indices()),
                                   "content_sha256": _content_digest(split)}
                if h.class_names:  # in WebDataset's and Parquet's bytes (each sample's .json)
                    splits[t.split]["class_names"] = list(h.class_names)
            # The shard's path from the record's folder (its name for TFRecord).
            tasks.append({"task": len(tasks), "split": t.split, "index": t.index,
                          "start": t.start, "stop": t.stop,
                          "shard": self.place.name_of(t.path)})
        plan = {"mnistconv_plan": PLAN_VERSION, "format": self.fmt.name, "options": options,
                "splits": splits, "tasks": tasks}
        canonical = json.dumps(plan, sort_keys=True, separators=(",", ":")).encode()
        plan["hash"] = hashlib.sha256(canonical).hexdigest()
        plan["output"] = self.named  # where, not what: not hashed (machines mount differently)
        return plan

    def metadata_targets(self) -> list:
        """The files finishing writes beside the shards: the format's and its description."""
        return self.job.metadata_targets() + describe.targets(self.fmt, self.path)

    def _read(self):
        """The progress record, None when there is none; of a damaged one (larger than any
        record of this plan, which is not read further), {} when its plan cannot be told,
        else the record without its broken entries. A link, FIFO or device in its place
        is refused in one line."""
        size = self.job.counters.size()
        limit = _record_limit(self.plan, size)
        try:
            data = self.place.read_record(limit)
        except OSError:
            return {}
        if data is None:
            return None
        if len(data) > limit:
            return {}
        try:
            record = parse_json(data, self.place.shown_record())
        except FormatError:
            return {}
        if not isinstance(record, dict) or not isinstance(record.get("plan_hash"), str):
            return {}
        shards = record.get("shards")
        record["shards"] = {name: entry for name, entry in shards.items()
                            if _whole(entry, size)} if isinstance(shards, dict) else {}
        return record

    def _intact(self, name, entry) -> bool:
        """A recorded shard whose file, hashed again, is what was recorded."""
        return isinstance(entry, dict) and self.place.digest(name) == (
            entry.get("bytes"), entry.get("sha256"))

    def _recognised(self):
        """{shard name: record entry} when, with no record, every shard of the plan is
        there and is what its task writes (written again to a temporary and compared): a
        plain run's output, which --resume keeps. None when a shard is missing; one that
        differs is refused."""
        place, tasks = self.place, self.plan["tasks"]
        found = [place.digest(t["shard"]) for t in tasks]
        if any(f is None for f in found):
            return None
        entries = {}
        for number, (task, on_disk) in enumerate(zip(tasks, found)):
            with place.writing(task["shard"], keep=False) as scratch:
                written, counters = self.job.write_shard(number, scratch)
            if on_disk != (written.bytes, written.sha256):
                raise UsageError(place.where(task["shard"]),
                                 "exists and is not what this conversion writes (an earlier "
                                 "run with another input or other options wrote it)",
                                 "run that conversion again, or use --force to replace it")
            entries[task["shard"]] = _entry(written, counters)
        return entries

    def prepare(self, force=False, resume=False) -> str:
        """Before any task writes: refuse a record of another plan and files no record of
        this plan owns (unless force, or resume recognises them), and create the record.
        Returns the record's path (a URL for a store)."""
        place, plan = self.place, self.plan
        with place.lock():
            try:
                record = self._read()
            except UsageError:
                if not force:
                    raise
                record = {}  # started over: the record is replaced (a link, not followed)
            found = self._recognised() if record is None and resume and not force else None
            rpath = place.shown_record()
            if record is not None and record.get("plan_hash") != plan["hash"] and not force:
                if not record:
                    raise UsageError(rpath, "is damaged: it names no plan whose progress "
                                            "it holds", "use --force to start over")
                raise UsageError(rpath, f"holds the progress of another plan "
                                        f"({str(record.get('plan_hash'))[:12]}; this one is "
                                        f"{plan['hash'][:12]}): a different input, options "
                                        "or shard count", "run the same conversion, or "
                                        "use --force to start over")
            if record is None or record.get("plan_hash") != plan["hash"]:
                if not force and found is None:
                    for target in [place.local(t["shard"]) for t in plan["tasks"]] \
                            + self.metadata_targets():
                        if place.exists(target):
                            raise exists_error(place.where(place.name_of(target)))
                    if self.job.stale:
                        raise exists_error(self.job.stale[0])
                place.write_record({"plan_hash": plan["hash"], "plan": plan,
                                    "shards": found or {}, "finished": False,
                                    "force": bool(force)})
        return rpath

    def run_task(self, number, resume=False):
        """Run task `number`: keep its shard when resuming and it is recorded and intact,
        else write and record it. Returns ("kept" or "written", OutputFile-like dict)."""
        place, plan = self.place, self.plan
        name = plan["tasks"][number]["shard"]
        # As the user named the output (a TFRecord shard beside it, Parquet's inside it).
        shown = place.shown(name, self.named)
        with place.lock():
            record = self._read() or {}
            if record.get("plan_hash") != plan["hash"]:
                raise UsageError(place.shown_record(), "holds no progress of this plan "
                                                       "(another run started over)",
                                 "run the tasks again")
            entry = record.get("shards", {}).get(name)
        if resume and self._intact(name, entry):
            return "kept", {"path": shown, **entry}
        # The record says this set is ours: a shard of it on disk is replaced.
        with place.writing(name) as staged:
            written, counters = self.job.write_shard(number, staged)
        entry = _entry(written, counters)
        with place.lock():
            record = self._read() or {}
            if record.get("plan_hash") == plan["hash"]:
                record["shards"][name] = entry
                record["finished"] = False
                place.write_record(record)
        return "written", {"path": shown, **entry}

    def finish(self, entries=None, rewritten=None):
        """If every shard is recorded and its file matches (else it is dropped from the
        record), finish the set once; a finished set's metadata files missing or changed
        since are written again (their names appended to `rewritten`). entries: {shard
        name: entry} the caller's tasks wrote (Beam's), taken where the record lacks them.
        Returns (finished, names of shards missing or bad)."""
        place, plan, size = self.place, self.plan, self.job.counters.size()
        with place.lock():
            record = self._read() or {}
            if record.get("plan_hash") != plan["hash"]:
                return False, [t["shard"] for t in plan["tasks"]]
            shards = record.setdefault("shards", {})
            for name, entry in (entries or {}).items():
                if name not in shards and _whole(entry, size):
                    shards[name] = entry
            bad = [t["shard"] for t in plan["tasks"]
                   if not self._intact(t["shard"], shards.get(t["shard"]))]
            if bad:
                for name in bad:
                    shards.pop(name, None)
                record["finished"] = False
                place.write_record(record)
                return False, bad
            was = record.get("finished") is True
            if was:  # every file of the set is checked, not only the shards
                before = record.get("metadata")
                changed = [n for n, f in before.items() if not isinstance(f, list)
                           or place.digest(n) != tuple(f)] \
                    if isinstance(before, dict) else None
                if changed == []:
                    return True, []
            elif record.get("force"):  # an earlier output's other shards: replaced
                for old in self.job.stale:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(old)
            record["metadata"] = self._finish_set(shards)
            if was and rewritten is not None:
                rewritten += [place.shown(n, self.named)
                              for n in changed or record["metadata"]]
            record["finished"] = True
            place.write_record(record)
        return True, []

    def _finish_set(self, shards) -> dict:
        """The format's finish and the describe step on the recorded shards: {name:
        [bytes, SHA-256]} of the metadata files written (uploaded to a store)."""
        job = self.job
        recorded = {t.path: (OutputFile(str(t.path), e["bytes"], e["sha256"]),
                             job.counters.from_list(e["counters"]))
                    for t, e in zip(job.targets, (shards[task["shard"]]
                                                  for task in self.plan["tasks"]))}
        with StagedOutput(force=True) as staged:  # the record says the set is ours
            job.finish(recorded, staged)
        describe.describe(self.dataset, self.path, [f for f, _ in recorded.values()],
                          self.fmt, job.options)
        return self.place.placed([self.place.name_of(t) for t in self.metadata_targets()])

    def totals(self) -> dict:
        """The write stats of a finished set, from the recorded shards' counters."""
        shards = (self._read() or {}).get("shards", {})
        merged = self.job.counters()
        for task in self.plan["tasks"]:
            if task["shard"] in shards:
                merged.merge(self.job.counters.from_list(shards[task["shard"]]["counters"]))
        return self.job.stats(merged)

    def metadata_files(self) -> list:
        """[{"path", "bytes", "sha256"}] of the files finishing wrote beside the shards."""
        place = self.place
        found = [(place.name_of(t), t) for t in self.metadata_targets()]
        return [{"path": place.shown(n, self.named) if place.store else str(t),
                 "bytes": f[0], "sha256": f[1]}
                for (n, t), f in ((nt, place.digest(nt[0])) for nt in found) if f is not None]

    def result(self, tasks, finished, missing, rewritten=()) -> dict:
        """What run() and beam.run() return: the plan's hash, the tasks run, whether the
        set is finished (its stats and metadata files then), the shards missing, and the
        metadata files of an already finished set written again (found missing or
        changed)."""
        return {"plan_hash": self.plan["hash"], "tasks": tasks, "finished": finished,
                "missing": missing, "stats": self.totals() if finished else {},
                "metadata": self.metadata_files() if finished else [],
                "rewritten": list(rewritten)}


def run(source, path, format_name, options, tasks=Tasks(), on_task=None) -> dict:
    """Run the tasks `tasks` names, then finish the set if it is complete. source: an
    InputSpec or a Dataset; options: the write options (workers included);
    on_task(status, task, file dict) after each task. Returns {"plan_hash", "tasks",
    "finished", "missing", "stats", "metadata"}.

        run(InputSpec("data/mnist"), "out/m.tfrecord", "tfrecord", {"shards": 4},
            Tasks(num_tasks=2, task_index=0))  # tasks 0, 2, 4, 6
    """
    from ..limits import count_in_range
    num_tasks = count_in_range(tasks.num_tasks, "--num-tasks", 1 << 20)
    task_index, resume = tasks.task_index, tasks.resume
    if not 0 <= int(task_index) < num_tasks:
        raise BadOption(None, f"--task-index must be 0..{num_tasks - 1}, not {task_index}")
    dataset = source.open() if isinstance(source, InputSpec) else source
    with PlanRun(dataset, path, format_name, options) as planned:
        planned.prepare(force=tasks.force, resume=resume)
        done = []
        for number in range(int(task_index), len(planned.plan["tasks"]), num_tasks):
            status, written = planned.run_task(number, resume=resume)
            done.append({"task": number, "status": status, **written})
            if on_task is not None:
                on_task(status, planned.plan["tasks"][number], written)
        rewritten: list = []
        finished, missing = planned.finish(rewritten=rewritten)
        return planned.result(done, finished, missing, rewritten)
