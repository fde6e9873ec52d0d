"""Shard plans: a sharded conversion as a list of independent tasks, run in any order,
on any machines, resumed after a crash, with the same bytes as one local run.

A plan is decided from the input's headers alone: for each split, its count cut into
shards by shards.shard_bounds (the cut the local writer makes), one task per shard:

    {"task": 3, "split": "train", "start": 30000, "stop": 45000,
     "shard": "mnist-train.tfrecord-00003-of-00004"}

Its hash covers the format, the options that change bytes (not workers), each split's
count, shape, dtype, class names and the SHA-256 of its labels and original indices
(cheap: one value per example; the pixels are not read to plan), and the tasks. A task writes its
shard with the format's own per-shard code (for TFRecord, writer.write_shard), staged
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

Formats that plan: PLANNED, TFRecord, Hugging Face Parquet (plan_parquet.py), the TFDS
directory (plan_tfds.py) and WebDataset (plan_webdataset.py). A format joins when its
writer can write one shard alone with the bytes of the whole set, its shards cut from
the counts alone: a module of sets, write_shard, stats (and finish, finish_targets when
the set has metadata) named in PLANNED. A shard's records are a RangeSplit of its split
(below), so a format's per-split encoding code writes one shard as it writes a split.
Not planned: WebDataset cut by bytes and a TFDS shard count that follows the encoded
size when the headers cannot decide it (both say to give a count instead), and the
single-file formats (nothing to cut).
"""

import contextlib
import hashlib
import json
import os

import numpy as np

from .errors import FormatError, UsageError
from .fileio import StagedOutput
from .limits import parse_json
from . import budget
from .records import DEFAULT_BATCH, Batch, Split
from .staging import staging_prefix

PLAN_VERSION = 1
RECORD_SUFFIX = ".mnistconv-plan.json"
# Write options that change how fast, never what is written: not part of a plan.
_NOT_PLANNED = ("workers", "processes")


def _tfrecord_sets(dataset, path, options):
    from .formats.tfrecord import writer
    options = {k: v for k, v in options.items() if k not in _NOT_PLANNED}
    plan, _, _, _ = writer._split_sets(
        dataset, path, options.get("preset", "recipe"), options.get("image_format"),
        options.get("jpeg_quality", 95), options.get("label_format"),
        options.get("with_index", False), options.get("shards"),
        options.get("compression", "none"), options.get("exact_jpeg_error", False))
    from .shards import other_shard_sets
    return [(split, shard_set.targets, shard_set.bounds,
             other_shard_sets(shard_set.base, shard_set.targets))
            for split, _, shard_set in plan]


def _tfrecord_shard(dataset, path, split_name, index, staged_path, options):
    from .formats.tfrecord import writer
    return writer.write_shard(dataset, path, split_name, index, staged_path, **options)


def _tfrecord_stats(counters, options):
    """write()'s stats from every shard's counters (records, JPEG error sum, max,
    records measured, pixels measured)."""
    records, esum, _, measured, pixels = (sum(c[i] for c in counters) for i in range(5))
    emax = max((c[2] for c in counters), default=0)
    stats = {"records": records}
    image_format = options.get("image_format")
    if image_format is None:
        from .codecs.example import PRESETS
        image_format = PRESETS[options.get("preset", "recipe")].image_format
    if image_format == "jpeg":
        stats["jpeg_mean_abs_error"] = round(esum / pixels, 4) if pixels else 0.0
        stats["jpeg_max_abs_error"] = emax
        stats["jpeg_error_records"] = measured
    return stats


class Planner:
    """What a format gives the plan:
    sets(dataset, path, options) -> [(split, shard paths, shard bounds
    (shards.shard_bounds), paths of an earlier output that the set supersedes)];
    shard(dataset, path, split name, index, staged path, options) -> (OutputFile,
    counters); stats([counters of each shard], options) -> write()'s stats;
    finish(dataset, path, options, {shard name: record entry}) writes the set's
    metadata once every shard is there (or None), and finish_targets(dataset, path,
    options) names what it writes (checked like shards before any task runs);
    `counters` is how many numbers shard() counts (a record's entry holds as many)."""

    def __init__(self, sets, shard, stats, finish=None, finish_targets=None, counters=1):
        self.sets, self.shard, self.stats, self.finish = sets, shard, stats, finish
        self.counters = counters
        self.finish_targets = finish_targets or (lambda dataset, path, options: [])


def _module_planner(module):
    """The Planner of a plan_<format> module (sets, write_shard, stats, and finish,
    finish_targets when the set has metadata beside its shards)."""
    def load():
        import importlib
        m = importlib.import_module(f"{__package__}.{module}")
        return Planner(m.sets, m.write_shard, m.stats, getattr(m, "finish", None),
                       getattr(m, "finish_targets", None), m.COUNTERS)
    return load


PLANNED = {"tfrecord": lambda: Planner(_tfrecord_sets, _tfrecord_shard, _tfrecord_stats,
                                      counters=5),
           "parquet": _module_planner("plan_parquet"),
           "tfds": _module_planner("plan_tfds"),
           "webdataset": _module_planner("plan_webdataset")}


def planner(format_name) -> Planner:
    """The format's Planner, or a usage error naming the formats that plan."""
    if format_name not in PLANNED:
        raise UsageError(None, f"writing {format_name} cannot be planned, resumed or run "
                               "on Beam (its writer does not write one shard alone)",
                         f"plan one of: {', '.join(PLANNED)}")
    return PLANNED[format_name]()


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
    from .codecs.classes import check_dataset
    check_dataset(dataset)  # as write() does
    # write()'s rule for output names, so every runner writes the local run's tree.
    path, options = registry.resolve_output(path, registry.get(format_name), options)
    defaults = {o.name: o.default for o in registry.get(format_name).write_options}
    # Only what differs from the format's defaults: the library's call and the command
    # line's (which passes every default) plan the same conversion with the same hash.
    options = {k: v for k, v in sorted(options.items()) if k not in _NOT_PLANNED
               and v is not None and v is not False and v != defaults.get(k)}
    splits, tasks = {}, []
    folder = os.path.dirname(record_path(path))
    for split, targets, bounds, _ in planner(format_name).sets(dataset, path, options):
        h = split.header
        splits[split.name] = {"count": h.count, "shape": list(h.shape),
                              "dtype": str(h.dtype), "labels_sha256": _digest(split.labels()),
                              "indices_sha256": _digest(split.indices())}
        if h.class_names:  # in WebDataset's and Parquet's bytes (each sample's .json)
            splits[split.name]["class_names"] = list(h.class_names)
        start = 0
        for index, (target, stop) in enumerate(zip(targets, bounds)):
            # The shard's path from the record's folder (its name for TFRecord).
            shard = os.path.relpath(os.path.abspath(target), folder)
            tasks.append({"task": len(tasks), "split": split.name, "index": index,
                          "start": start, "stop": stop, "shard": shard})
            start = stop
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


def _read_record(path, plan):
    """The progress record, None when there is none. A damaged one (not JSON, nested
    past the recursion limit, fields of the wrong type) trusts no shard: {} when its
    plan cannot be told, else its plan with the entries that are not whole dropped
    (their shards are redone)."""
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
                        if _whole(entry, planner(plan["format"]).counters)} \
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
    for task in plan["tasks"]:
        target = os.path.join(folder, task["shard"])
        staged = StagedOutput(force=True)
        try:
            tmp = staged.file(target)
            written, counters = planner(plan["format"]).shard(
                dataset, path, task["split"], task["index"], tmp, plan["options"])
        finally:
            staged.abort()
        if file_sha256(target) != (written.bytes, written.sha256):
            raise UsageError(target, "exists and is not what this conversion writes (an "
                                     "earlier run with another input or other options "
                                     "wrote it)", "run that conversion again, or use "
                                     "--force to replace it")
        entries[task["shard"]] = {"bytes": written.bytes, "sha256": written.sha256,
                                  "counters": counters}
    return entries


def prepare(dataset, path, plan, *, force=False, resume=False):
    """Before any task writes: refuse a record of another plan (or, with force, start
    over), refuse shard files or other shard sets that no record of this plan owns
    (unless force, or resume finds them to be this plan's complete output: see
    _recognised), and create the record. Returns the record's path."""
    rpath = record_path(path)
    folder = os.path.dirname(rpath)
    the = planner(plan["format"])
    with _locked(folder):
        record = _read_record(rpath, plan)
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
                        + the.finish_targets(dataset, path, plan["options"]):
                    if os.path.lexists(target):
                        raise exists_error(target)
                for _, _, _, stale in the.sets(dataset, path, plan["options"]):
                    if stale:
                        raise exists_error(stale[0])
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
    # As the user named the output (a TFRecord shard beside it, Parquet's inside it).
    shown = os.path.relpath(os.path.join(folder, name)) \
        if not os.path.isabs(str(path)) else os.path.join(folder, name)
    with _locked(folder):
        record = _read_record(rpath, plan) or {}
        if record.get("plan_hash") != plan["hash"]:
            raise UsageError(rpath, "holds no progress of this plan (another run "
                                    "started over)", "run the tasks again")
        entry = record.get("shards", {}).get(name)
    if resume and _intact(folder, name, entry):
        return "kept", {"path": shown, **entry}
    options = dict(plan["options"], workers=workers, processes=processes)
    # The record says this set is ours: a shard of it on disk (a killed task's, or a
    # tampered one) is replaced.
    with StagedOutput(force=True) as staged:
        tmp = staged.file(os.path.join(folder, name))
        written, counters = planner(plan["format"]).shard(dataset, path, task["split"],
                                                            task["index"], tmp, options)
    entry = {"bytes": written.bytes, "sha256": written.sha256, "counters": counters}
    with _locked(folder):
        record = _read_record(rpath, plan) or {}
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
    with _locked(folder):
        record = _read_record(rpath, plan) or {}
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
            the = planner(plan["format"])
            if record.get("force"):  # an earlier output's other shards: replaced, as locally
                for _, _, _, stale in the.sets(dataset, path, plan["options"]):
                    for old in stale:
                        os.unlink(old)
            if the.finish is not None:
                the.finish(dataset, path, plan["options"], shards)
            record["finished"] = True
            _write_record(rpath, record)
    return True, []


def metadata_files(dataset, path, plan) -> list:
    """[{"path", "bytes", "sha256"}] of the files finishing wrote beside the shards
    (TFDS' dataset_info.json ..., Parquet's README.md), as they are on disk now."""
    files = []
    for target in planner(plan["format"]).finish_targets(dataset, path, plan["options"]):
        found = file_sha256(target)
        if found is not None:
            files.append({"path": str(target), "bytes": found[0], "sha256": found[1]})
    return files


def totals(path, plan) -> dict:
    """The write stats of a finished set, from the recorded shards' counters (the same
    stats one local write() reports)."""
    record = _read_record(record_path(path), plan) or {}
    shards = record.get("shards", {})
    counters = [shards[t["shard"]]["counters"] for t in plan["tasks"] if t["shard"] in shards]
    return planner(plan["format"]).stats(counters, plan["options"])


def run(source, path, format_name, options, *, num_tasks=1, task_index=0, resume=False,
        force=False, workers=1, processes=False, on_task=None) -> dict:
    """Run tasks task_index, task_index + num_tasks, ... of the plan (every task with
    the defaults), then finish the set if it is complete. source: an InputSpec or a
    Dataset. on_task(status, task, file dict) is called after each task. Returns
    {"plan_hash", "tasks": [...], "finished": bool, "missing": [...], "stats",
    "metadata": the files finishing wrote beside the shards}.

        run(InputSpec("data/mnist"), "out/m.tfrecord", "tfrecord", {"shards": 4},
            num_tasks=2, task_index=0)  # tasks 0, 2, 4, 6
    """
    from .limits import count_in_range
    num_tasks = count_in_range(num_tasks, "--num-tasks", 1 << 20)
    if not 0 <= int(task_index) < num_tasks:
        raise UsageError(None, f"--task-index must be 0..{num_tasks - 1}, not {task_index}")
    dataset = source.open() if isinstance(source, InputSpec) else source
    plan = make_plan(dataset, path, format_name, options)
    path = plan["output"]
    prepare(dataset, path, plan, force=force, resume=resume)
    done = []
    for number in range(int(task_index), len(plan["tasks"]), num_tasks):
        status, written = run_task(dataset, path, plan, number, resume=resume,
                                   workers=workers, processes=processes)
        done.append({"task": number, "status": status, **written})
        if on_task is not None:
            on_task(status, plan["tasks"][number], written)
    finished, missing = finish(dataset, path, plan)
    return {"plan_hash": plan["hash"], "tasks": done, "finished": finished,
            "missing": missing, "stats": totals(path, plan) if finished else {},
            "metadata": metadata_files(dataset, path, plan) if finished else []}
