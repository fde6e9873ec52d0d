"""Shard plans: a sharded conversion as a list of independent tasks, run in any order,
on any machines, resumed after a crash, with the same bytes as one local run.

A plan is decided from the input's headers alone: for each split, its count cut into
shards by shards.shard_bounds (the cut the local writer makes), one task per shard:

    {"task": 3, "split": "train", "start": 30000, "stop": 45000,
     "shard": "mnist-train.tfrecord-00003-of-00004"}

Its hash covers the format, the options that change bytes (not workers), each split's
count, shape, dtype, class names and the SHA-256 of its labels and original indices
(cheap: one value per example; the pixels are not read to plan), and the tasks. A task
writes its shard with the format's ShardedWrite (mnistconv.contract), staged
and committed alone (staging.StagedOutput), then notes the shard's name, bytes and
SHA-256 in the set's progress record: a hidden JSON file beside the output,
`.<output name>.mnistconv-plan.json`, read and rewritten under a lock on its folder
(flock: concurrent tasks on one machine, or on a shared file system that honours it).

A record of another plan is refused (a different input, options or shard count would
mix two sets) unless force. resume=True keeps a shard only when it is in the record and
its file, hashed again from disk, matches; every other shard of the task is redone.
The task that completes the set finishes it: every shard is hashed again from disk
and, when all match, the format's finishing step runs (plain TFRecord has none: the
shards are the output; with force, the base's other shard sets are removed) and the
record is marked finished. The record stays, so a later --resume is a check that
changes nothing.

Formats that plan are those whose spec names a sharded write (mnistconv.contract);
this module names none. A shard's records are a RangeSplit of its split (below), so a
format's per-split encoding code writes one shard as it writes a split. Not planned:
WebDataset cut by bytes and a TFDS shard count that follows the encoded size when the
headers cannot decide it (both say to give a count instead), and the single-file
formats (nothing to cut).
"""

import contextlib
import hashlib
from dataclasses import dataclass
import json
import os

import numpy as np

from .contract import ShardedWrite, checked_options, prepare_write
from .errors import BadOption, FormatError, UsageError
from .fileio import StagedOutput
from .limits import parse_json
from . import budget
from .records import DEFAULT_BATCH, Batch, Split
from .staging import staging_prefix

PLAN_VERSION = 1
RECORD_SUFFIX = ".mnistconv-plan.json"
# Write options that change how fast, never what is written: not part of a plan.
_NOT_PLANNED = ("workers", "processes")


def sharded(dataset, path, plan, workers=1, processes=False) -> ShardedWrite:
    """The plan's ShardedWrite (mnistconv.contract), encoding on `workers`."""
    return prepare_write(plan["format"], dataset, path,
                         dict(plan["options"], workers=workers, processes=processes))


class RangeSplit(Split):
    """Records start..stop of a split as a split of their own (a shard's records), for
    a format's per-split code to write one shard: the header's count is the range's,
    batches() read only the range when the split can seek (take), else read the split
    up to stop and skip what comes before start.

        shard = RangeSplit(split, 30000, 45000)
        shard.header.count  # 15000
    """

    def __init__(self, split, start, stop):
        super().__init__(split.name, split.header.with_(count=stop - start))
        self.split, self.start, self.stop = split, int(start), int(stop)
        self.seekable = type(split).take is not Split.take

    def batches(self, batch_size=DEFAULT_BATCH):
        """The range's records, in order, at most batch_size at a time."""
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
        """The range's labels."""
        return np.asarray(self.split.labels())[self.start:self.stop]

    def indices(self):
        """The range's original indices."""
        return np.asarray(self.split.indices(), np.int64)[self.start:self.stop]

    def num_classes(self):
        """The whole split's class count (a shard may miss a class)."""
        return self.split.num_classes()


class InputSpec:
    """How every task opens the same input (picklable, for Beam workers): the path,
    its format, read options, a selection (keyword arguments of stream.select) and the
    read-side limits in effect where it is made (--max-image-size, --timeout), which a
    worker, starting with the defaults, must apply as the launcher does.

        spec = InputSpec("data/mnist", "idx")
        dataset = spec.open()
    """

    def __init__(self, path, format=None, read_options=None, select=None, limits=None):
        from . import limits as cap, remote
        self.path, self.format = str(path), format
        self.read_options, self.select = dict(read_options or {}), select
        self.limits = dict(limits) if limits is not None else {
            "max_image_pixels": cap.MAX_IMAGE_PIXELS, "timeout": remote.current_timeout()}

    def open(self):
        """The dataset, read and selected under the spec's limits (the image size cap
        stays set in this process: a task decodes its images after open)."""
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
    # Hashed in place, a million at a time: tobytes() copied 5M labels and indices whole
    # (a --plan's peak grew with the number of images).
    array = np.ascontiguousarray(array)
    digest = hashlib.sha256(array.dtype.str.encode())
    flat = array.reshape(-1)
    for start in range(0, len(flat), 1 << 20):
        digest.update(flat[start:start + (1 << 20)])
    return digest.hexdigest()


def _canonical(obj) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def make_plan(dataset, path, format_name, options) -> dict:
    """The plan of writing dataset to path as format_name with options (see the module
    docstring); nothing is written. plan["output"] is path as write() names it (`out`
    is the folder `out/`, a .gz suffix selects gzip): the path prepare, run_task and
    finish take.

        plan = make_plan(mnistconv.read("data/mnist"), "m.tfrecord", "tfrecord",
                         {"shards": 4})
        [t["shard"] for t in plan["tasks"]][:1]  # ['m-train.tfrecord-00000-of-00004']
    """
    from . import registry
    # write()'s rule for output names, so every runner writes the local run's tree.
    path, resolved = checked_options(registry.get(format_name), path, options)
    job = prepare_write(format_name, dataset, path, resolved)
    defaults = {o.name: o.default for o in registry.get(format_name).write_options}
    # Only what differs from the format's defaults: the library's call and the command
    # line's (which passes every default) plan the same conversion with the same hash.
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
    plan["hash"] = hashlib.sha256(_canonical(plan)).hexdigest()
    plan["output"] = str(path)  # where, not what: not hashed (machines mount differently)
    return plan


def record_path(path) -> str:
    """The progress record of an output: `.<name>.mnistconv-plan.json` beside it."""
    folder, name = os.path.split(os.path.abspath(str(path)))
    return os.path.join(folder, f".{name}{RECORD_SUFFIX}")


@contextlib.contextmanager
def _locked(folder):
    """An exclusive flock on folder while the record is read and rewritten (never held
    while StagedOutput commits: it locks the same folder)."""
    import fcntl
    os.makedirs(folder, exist_ok=True)
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _read_record(path, size):
    """The progress record, None when there is none. A damaged one (not JSON, nested
    past the recursion limit, fields of the wrong type) trusts no shard: {} when its
    plan cannot be told, else its plan with the entries that are not whole dropped
    (their shards are redone). size: how many counters a whole entry holds."""
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
                        if _whole(entry, size)} \
        if isinstance(shards, dict) else {}
    return record


def _whole(entry, counters) -> bool:
    """A shard's entry as run_task writes it: bytes, SHA-256 and `counters` whole
    numbers (what the format's stats and finish read)."""
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
    digest, size = hashlib.sha256(), 0
    try:
        with open(path, "rb") as f:
            while block := f.read(1 << 20):
                digest.update(block)
                size += len(block)
    except OSError:
        return None
    return size, digest.hexdigest()


def _intact(folder, name, entry) -> bool:
    """A recorded shard whose file, hashed again from disk, is what was recorded."""
    if not isinstance(entry, dict):
        return False
    return file_sha256(os.path.join(folder, name)) == (entry.get("bytes"),
                                                        entry.get("sha256"))


def _recognised(dataset, path, plan, folder):
    """{shard name: record entry} when every shard of the plan is on disk, with no
    record, and each is exactly what its task writes (written again beside it to a
    temporary, compared by size and SHA-256, the temporary removed): the complete output
    of a plain run of the same conversion, which --resume then keeps. None when a shard
    is missing; a shard that differs is refused in one line (another input or other
    options wrote it)."""
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
    """Before any task writes: refuse a record of another plan (or, with force, start
    over), refuse shard files or other shard sets that no record of this plan owns
    (unless force, or resume finds them to be this plan's complete output: see
    _recognised), and create the record. Returns the record's path."""
    rpath = record_path(path)
    folder = os.path.dirname(rpath)
    job = sharded(dataset, path, plan)
    with _locked(folder):
        record = _read_record(rpath, job.counters.size())
        if record is None and resume and not force:
            found = _recognised(dataset, path, plan, folder)
            if found is not None:
                _write_record(rpath, {"plan_hash": plan["hash"], "plan": plan,
                                      "shards": found, "finished": False,
                                      "force": False})
                return rpath
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
            if not force:
                from .staging import exists_error
                for target in [os.path.join(folder, t["shard"]) for t in plan["tasks"]] \
                        + job.metadata_targets():
                    if os.path.lexists(target):
                        raise exists_error(target)
                if job.stale:
                    raise exists_error(job.stale[0])
            _write_record(rpath, {"plan_hash": plan["hash"], "plan": plan, "shards": {},
                                  "finished": False, "force": bool(force)})
    return rpath


def run_task(dataset, path, plan, number, *, resume=False, workers=1, processes=False):
    """Run task `number` of the plan: keep its shard when resuming and the shard is
    recorded and intact, else write it (staged, committed) and record it. Returns
    ("kept" or "written", OutputFile-like dict)."""
    task = plan["tasks"][number]
    rpath = record_path(path)
    folder = os.path.dirname(rpath)
    name = task["shard"]
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
    # The record says this set is ours: a shard of it on disk (a killed task's, or a
    # tampered one) is replaced.
    with StagedOutput(force=True) as staged:
        written, counters = job.write_shard(number,
                                            staged.file(os.path.join(folder, name)))
    entry = _entry(written, counters)
    with _locked(folder):
        record = _read_record(rpath, job.counters.size()) or {}
        if record.get("plan_hash") == plan["hash"]:
            record["shards"][name] = entry
            record["finished"] = False
            _write_record(rpath, record)
    return "written", {"path": shown, **entry}


def finish(dataset, path, plan):
    """If every shard of the plan is recorded, check each against its file (hashed
    again from disk; a mismatch is dropped from the record, to be redone by --resume)
    and finish the set once. Returns (finished, names of shards missing or bad)."""
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
    """[{"path", "bytes", "sha256"}] of the files finishing wrote beside the shards
    (TFDS' dataset_info.json ..., Parquet's README.md), as they are on disk now."""
    files = []
    for target in sharded(dataset, path, plan).metadata_targets():
        found = file_sha256(target)
        if found is not None:
            files.append({"path": str(target), "bytes": found[0], "sha256": found[1]})
    return files


def totals(dataset, path, plan) -> dict:
    """The write stats of a finished set, from the recorded shards' counters merged (the
    same stats one local write() reports)."""
    job = sharded(dataset, path, plan)
    record = _read_record(record_path(path), job.counters.size()) or {}
    shards = record.get("shards", {})
    merged = job.counters()
    for task in plan["tasks"]:
        if task["shard"] in shards:
            merged.merge(job.counters.from_list(shards[task["shard"]]["counters"]))
    return job.stats(merged)


def _entry(written, counters) -> dict:
    """A shard's entry in the record: bytes, SHA-256 and counters (a list)."""
    return {"bytes": written.bytes, "sha256": written.sha256,
            "counters": counters.as_list()}


def _recorded(target, entry, job):
    """A record's entry as ShardedWrite.finish() takes it: (OutputFile, Counters)."""
    from .records import OutputFile
    return (OutputFile(str(target), entry["bytes"], entry["sha256"]),
            job.counters.from_list(entry["counters"]))


@dataclass(frozen=True)
class Tasks:
    """Which tasks of a plan a run takes, tasks task_index, task_index + num_tasks, ...
    (every task by default), and how: resume keeps shards recorded and intact, force
    starts over from another plan's record or replaces files no record owns."""

    num_tasks: int = 1
    task_index: int = 0
    resume: bool = False
    force: bool = False


def run(source, path, format_name, options, tasks=Tasks(), on_task=None) -> dict:
    """Run the tasks of the plan that `tasks` names, then finish the set if it is
    complete. source: an InputSpec or a Dataset; options: the write options (workers
    and processes included: how the tasks encode). on_task(status, task, file dict) is
    called after each task. Returns {"plan_hash", "tasks": [...], "finished": bool,
    "missing": [...], "stats", "metadata": the files finishing wrote beside the shards}.

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
