"""Shard plans: a sharded conversion as independent tasks, run in any order, on any
machines, resumed after a crash, with the same bytes as one local run.

A plan, decided from the headers alone, has one task per shard of the format's
ShardedWrite (mnistconv.contract); its hash covers the format, the options that change
bytes, each split's header, labels and indices (not the pixels), and the tasks. A task
writes its shard staged, then notes its bytes, SHA-256 and counters in the progress
record `.<output>.mnistconv-plan.json` beside the output, under a flock on its folder.
A record of another plan is refused unless force; resume keeps a shard whose file,
hashed again, matches. The task that completes the set checks every shard and finishes
it once; a later --resume changes nothing. This module names no format.
"""

import contextlib
import hashlib
from dataclasses import dataclass
import json
import os

import numpy as np

from .contract import ShardedWrite, checked_options, prepare_write
from .errors import BadOption, FormatError, UsageError
from .fileio import StagedOutput, sha256_file
from .limits import parse_json
from . import budget
from .records import DEFAULT_BATCH, Batch, Split
from .staging import exists_error, staging_prefix

PLAN_VERSION = 1
RECORD_SUFFIX = ".mnistconv-plan.json"
# Write options that change how fast, never what is written.
_NOT_PLANNED = ("workers", "processes")


def sharded(dataset, path, plan, workers=1, processes=False) -> ShardedWrite:
    """The plan's ShardedWrite (mnistconv.contract), encoding on `workers`."""
    return prepare_write(plan["format"], dataset, path,
                         dict(plan["options"], workers=workers, processes=processes))


class RangeSplit(Split):
    """Records start..stop of a split as a split of their own (a shard's records), read
    with take() when the split can seek, else read up to stop."""

    def __init__(self, split, start, stop):
        super().__init__(split.name, split.header.with_(count=stop - start))
        self.split, self.start, self.stop = split, int(start), int(stop)
        self.seekable = type(split).take is not Split.take

    def batches(self, batch_size=DEFAULT_BATCH):
        start, stop = self.start, self.stop
        batch_size = budget.rows(self.header, batch_size)
        if self.seekable:
            labels, indices = self.labels(), self.indices()
            for at in range(0, stop - start, batch_size):
                end = min(stop - start, at + batch_size)
                positions = np.arange(start + at, start + end, dtype=np.int64)
                yield Batch(self.split.take(positions), labels[at:end], indices[at:end])
            return
        position = 0
        for batch in self.split.batches(batch_size):
            n = len(batch)
            lo, hi = max(start - position, 0), min(stop - position, n)
            if lo < hi:
                yield Batch(batch.images[lo:hi], batch.labels[lo:hi], batch.indices[lo:hi])
            position += n
            if position >= stop:
                return

    def labels(self):
        return np.asarray(self.split.labels())[self.start:self.stop]

    def indices(self):
        return np.asarray(self.split.indices(), np.int64)[self.start:self.stop]

    def num_classes(self):
        """The whole split's class count (a shard may miss a class)."""
        return self.split.num_classes()


class InputSpec:
    """How every task opens the same input (picklable, for Beam workers): path, format,
    read options, a selection (stream.select's keywords) and the read-side limits in
    effect where it is made (--max-image-size, --timeout), applied by every worker."""

    def __init__(self, path, format=None, read_options=None, select=None, limits=None):
        from . import limits as cap, remote
        self.path, self.format = str(path), format
        self.read_options, self.select = dict(read_options or {}), select
        self.limits = dict(limits) if limits is not None else {
            "max_image_pixels": cap.MAX_IMAGE_PIXELS, "timeout": remote.current_timeout()}

    def open(self):
        """The dataset, read and selected under the spec's limits (the image cap stays set)."""
        import mnistconv
        from . import remote
        from .limits import set_max_image_pixels
        set_max_image_pixels(self.limits["max_image_pixels"])
        with remote.timeout(self.limits["timeout"]):
            dataset = mnistconv.read(self.path, self.format, **self.read_options)
        if self.select is not None:
            from . import stream
            dataset = stream.select(dataset, **self.select)
        return dataset


def _digest(array):
    # Hashed in place, a million at a time: memory stays flat however many images.
    array = np.ascontiguousarray(array)
    digest = hashlib.sha256(array.dtype.str.encode())
    flat = array.reshape(-1)
    for start in range(0, len(flat), 1 << 20):
        digest.update(flat[start:start + (1 << 20)])
    return digest.hexdigest()


def make_plan(dataset, path, format_name, options) -> dict:
    """The plan of writing dataset to path as format_name with options; nothing is
    written. plan["output"] is path as write() names it: what prepare, run_task and
    finish take."""
    from . import registry
    # write()'s rule for output names, so every runner writes the local run's tree.
    path, resolved = checked_options(registry.get(format_name), path, options)
    job = prepare_write(format_name, dataset, path, resolved)
    defaults = {o.name: o.default for o in registry.get(format_name).write_options}
    # Only what differs from the defaults: the library's call and the command line's
    # (every default passed) get the same hash.
    options = {k: v for k, v in sorted(vars(job.options).items()) if k not in _NOT_PLANNED
               and v is not None and v is not False and v != defaults.get(k)}
    splits, tasks = {}, []
    folder = os.path.dirname(record_path(path))
    for target in job.targets:
        h = dataset.splits[target.split].header
        if target.split not in splits:
            split = dataset.splits[target.split]
            splits[split.name] = {"count": h.count, "shape": list(h.shape),
                                  "dtype": str(h.dtype),
                                  "labels_sha256": _digest(split.labels()),
                                  "indices_sha256": _digest(split.indices())}
            if h.class_names:  # in WebDataset's and Parquet's bytes (each sample's .json)
                splits[split.name]["class_names"] = list(h.class_names)
        # The shard's path from the record's folder (its name for TFRecord).
        tasks.append({"task": len(tasks), "split": target.split, "index": target.index,
                      "start": target.start, "stop": target.stop,
                      "shard": os.path.relpath(os.path.abspath(target.path), folder)})
    plan = {"mnistconv_plan": PLAN_VERSION, "format": format_name, "options": options,
            "splits": splits, "tasks": tasks}
    canonical = json.dumps(plan, sort_keys=True, separators=(",", ":")).encode()
    plan["hash"] = hashlib.sha256(canonical).hexdigest()
    plan["output"] = str(path)  # where, not what: not hashed (machines mount differently)
    return plan


def record_path(path) -> str:
    """The progress record of an output: `.<name>.mnistconv-plan.json` beside it."""
    folder, name = os.path.split(os.path.abspath(str(path)))
    return os.path.join(folder, f".{name}{RECORD_SUFFIX}")


@contextlib.contextmanager
def _locked(folder):
    """An exclusive flock on folder (never held while StagedOutput commits: it locks it too)."""
    import fcntl
    os.makedirs(folder, exist_ok=True)
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _read_record(path, size):
    """The progress record, None when there is none; of a damaged one, {} when its plan
    cannot be told, else the record without its broken entries (size: counters each)."""
    try:
        with open(path, "rb") as f:
            record = parse_json(f.read(), path)
    except FileNotFoundError:
        return None
    except (OSError, FormatError):
        return {}
    if not isinstance(record, dict) or not isinstance(record.get("plan_hash"), str):
        return {}
    shards = record.get("shards")
    record["shards"] = {name: entry for name, entry in shards.items()
                        if _whole(entry, size)} if isinstance(shards, dict) else {}
    return record


def _whole(entry, counters) -> bool:
    """A shard's entry as run_task writes it: bytes, SHA-256 and `counters` numbers."""
    def number(n):
        return type(n) is int and n >= 0
    return isinstance(entry, dict) and number(entry.get("bytes")) and \
        isinstance(entry.get("sha256"), str) and isinstance(entry.get("counters"), list) \
        and len(entry["counters"]) == counters and all(map(number, entry["counters"]))


def _write_record(path, record):
    """Replace the record whole (a temporary beside it, renamed)."""
    folder = os.path.dirname(path)
    tmp = os.path.join(folder, staging_prefix(os.path.basename(path)) + "record")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(record, f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(tmp, path)


def file_sha256(path):
    """(bytes, SHA-256) of a file on disk, or None when it cannot be read."""
    try:
        return os.path.getsize(path), sha256_file(path)
    except OSError:
        return None


def _intact(folder, name, entry) -> bool:
    """A recorded shard whose file, hashed again from disk, is what was recorded."""
    return isinstance(entry, dict) and file_sha256(os.path.join(folder, name)) == (
        entry.get("bytes"), entry.get("sha256"))


def _recognised(dataset, path, plan, folder):
    """{shard name: record entry} when, with no record, every shard of the plan is on disk
    and is what its task writes (written again to a temporary and compared): a plain
    run's output, which --resume keeps. None when a shard is missing; one that differs
    is refused."""
    names = [t["shard"] for t in plan["tasks"]]
    if not all(os.path.isfile(os.path.join(folder, n)) for n in names):
        return None
    entries = {}
    job = sharded(dataset, path, plan)
    for number, task in enumerate(plan["tasks"]):
        target = os.path.join(folder, task["shard"])
        staged = StagedOutput(force=True)
        try:
            written, counters = job.write_shard(number, staged.file(target))
        finally:
            staged.abort()
        if file_sha256(target) != (written.bytes, written.sha256):
            raise UsageError(target, "exists and is not what this conversion writes (an "
                                     "earlier run with another input or other options "
                                     "wrote it)", "run that conversion again, or use "
                                     "--force to replace it")
        entries[task["shard"]] = _entry(written, counters)
    return entries


def prepare(dataset, path, plan, *, force=False, resume=False):
    """Before any task writes: refuse a record of another plan and files no record of
    this plan owns (unless force, or resume recognises them), and create the record.
    Returns the record's path."""
    rpath = record_path(path)
    folder = os.path.dirname(rpath)
    job = sharded(dataset, path, plan)
    with _locked(folder):
        record = _read_record(rpath, job.counters.size())
        found = _recognised(dataset, path, plan, folder) \
            if record is None and resume and not force else None
        if record is not None and record.get("plan_hash") != plan["hash"] and not force:
            if not record:
                raise UsageError(rpath, "is damaged: it names no plan whose progress it "
                                        "holds", "use --force to start over")
            raise UsageError(rpath, f"holds the progress of another plan "
                                    f"({str(record.get('plan_hash'))[:12]}; this one is "
                                    f"{plan['hash'][:12]}): a different input, options "
                                    "or shard count", "run the same conversion, or use "
                                    "--force to start over")
        if record is None or record.get("plan_hash") != plan["hash"]:
            if not force and found is None:
                for target in [os.path.join(folder, t["shard"]) for t in plan["tasks"]] \
                        + job.metadata_targets():
                    if os.path.lexists(target):
                        raise exists_error(target)
                if job.stale:
                    raise exists_error(job.stale[0])
            _write_record(rpath, {"plan_hash": plan["hash"], "plan": plan,
                                  "shards": found or {}, "finished": False, "force": bool(force)})
    return rpath


def run_task(dataset, path, plan, number, *, resume=False, workers=1, processes=False):
    """Run task `number`: keep its shard when resuming and it is recorded and intact, else
    write and record it. Returns ("kept" or "written", OutputFile-like dict)."""
    rpath = record_path(path)
    folder = os.path.dirname(rpath)
    name = plan["tasks"][number]["shard"]
    job = sharded(dataset, path, plan, workers, processes)
    # As the user named the output (a TFRecord shard beside it, Parquet's inside it).
    shown = os.path.relpath(os.path.join(folder, name)) \
        if not os.path.isabs(str(path)) else os.path.join(folder, name)
    with _locked(folder):
        record = _read_record(rpath, job.counters.size()) or {}
        if record.get("plan_hash") != plan["hash"]:
            raise UsageError(rpath, "holds no progress of this plan (another run "
                                    "started over)", "run the tasks again")
        entry = record.get("shards", {}).get(name)
    if resume and _intact(folder, name, entry):
        return "kept", {"path": shown, **entry}
    # The record says this set is ours: a shard of it on disk is replaced.
    with StagedOutput(force=True) as staged:
        written, counters = job.write_shard(number, staged.file(os.path.join(folder, name)))
    entry = _entry(written, counters)
    with _locked(folder):
        record = _read_record(rpath, job.counters.size()) or {}
        if record.get("plan_hash") == plan["hash"]:
            record["shards"][name] = entry
            record["finished"] = False
            _write_record(rpath, record)
    return "written", {"path": shown, **entry}


def finish(dataset, path, plan):
    """If every shard is recorded and its file matches (else it is dropped from the
    record), finish the set once. Returns (finished, names of shards missing or bad)."""
    rpath = record_path(path)
    folder = os.path.dirname(rpath)
    job = sharded(dataset, path, plan)
    with _locked(folder):
        record = _read_record(rpath, job.counters.size()) or {}
        if record.get("plan_hash") != plan["hash"]:
            return False, [t["shard"] for t in plan["tasks"]]
        shards = record.setdefault("shards", {})
        bad = [t["shard"] for t in plan["tasks"]
               if not _intact(folder, t["shard"], shards.get(t["shard"]))]
        if bad:
            for name in bad:
                shards.pop(name, None)
            record["finished"] = False
            _write_record(rpath, record)
            return False, bad
        if not record.get("finished"):
            if record.get("force"):  # an earlier output's other shards: replaced, as locally
                for old in job.stale:
                    os.unlink(old)
            job.finish({target.path: _recorded(target.path, shards[task["shard"]], job)
                        for target, task in zip(job.targets, plan["tasks"])})
            record["finished"] = True
            _write_record(rpath, record)
    return True, []


def metadata_files(dataset, path, plan) -> list:
    """[{"path", "bytes", "sha256"}] of the files finishing wrote beside the shards."""
    found = [(str(t), file_sha256(t)) for t in sharded(dataset, path, plan).metadata_targets()]
    return [{"path": p, "bytes": f[0], "sha256": f[1]} for p, f in found if f is not None]


def totals(dataset, path, plan) -> dict:
    """The write stats of a finished set, from the recorded shards' counters."""
    job = sharded(dataset, path, plan)
    record = _read_record(record_path(path), job.counters.size()) or {}
    shards = record.get("shards", {})
    merged = job.counters()
    for task in plan["tasks"]:
        if task["shard"] in shards:
            merged.merge(job.counters.from_list(shards[task["shard"]]["counters"]))
    return job.stats(merged)


def _entry(written, counters) -> dict:
    return {"bytes": written.bytes, "sha256": written.sha256,
            "counters": counters.as_list()}


def _recorded(target, entry, job):
    """A record's entry as ShardedWrite.finish() takes it."""
    from .records import OutputFile
    return (OutputFile(str(target), entry["bytes"], entry["sha256"]),
            job.counters.from_list(entry["counters"]))


@dataclass(frozen=True)
class Tasks:
    """Which tasks of a plan a run takes (task_index, task_index + num_tasks, ...) and
    how: resume keeps intact shards, force starts over."""

    num_tasks: int = 1
    task_index: int = 0
    resume: bool = False
    force: bool = False


def run(source, path, format_name, options, tasks=Tasks(), on_task=None) -> dict:
    """Run the tasks `tasks` names, then finish the set if it is complete. source: an
    InputSpec or a Dataset; options: the write options (workers included);
    on_task(status, task, file dict) after each task. Returns {"plan_hash", "tasks",
    "finished", "missing", "stats", "metadata"}.

        run(InputSpec("data/mnist"), "out/m.tfrecord", "tfrecord", {"shards": 4},
            Tasks(num_tasks=2, task_index=0))  # tasks 0, 2, 4, 6
    """
    from .limits import count_in_range
    num_tasks = count_in_range(tasks.num_tasks, "--num-tasks", 1 << 20)
    task_index, resume = tasks.task_index, tasks.resume
    if not 0 <= int(task_index) < num_tasks:
        raise BadOption(None, f"--task-index must be 0..{num_tasks - 1}, not {task_index}")
    dataset = source.open() if isinstance(source, InputSpec) else source
    plan = make_plan(dataset, path, format_name, options)
    path = plan["output"]
    prepare(dataset, path, plan, force=tasks.force, resume=resume)
    done = []
    for number in range(int(task_index), len(plan["tasks"]), num_tasks):
        status, written = run_task(dataset, path, plan, number, resume=resume,
                                   workers=options.get("workers", 1),
                                   processes=options.get("processes", False))
        done.append({"task": number, "status": status, **written})
        if on_task is not None:
            on_task(status, plan["tasks"][number], written)
    finished, missing = finish(dataset, path, plan)
    return {"plan_hash": plan["hash"], "tasks": done, "finished": finished,
            "missing": missing, "stats": totals(dataset, path, plan) if finished else {},
            "metadata": metadata_files(dataset, path, plan) if finished else []}
