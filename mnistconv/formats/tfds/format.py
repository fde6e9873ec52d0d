"""TFDS prepared dataset directories, written and read without TensorFlow.

The layout TFDS itself writes (tfds.builder_from_directory and tfds.load(data_dir=)
read it):
    DIR/<name>/<version>/dataset_info.json    splits, shard lengths, numBytes (info.py)
    DIR/<name>/<version>/features.json        Image (H, W, 1) uint8 + ClassLabel
    DIR/<name>/<version>/label.labels.txt     class names, one a line
    DIR/<name>/<version>/<name>-<split>.<tfrecord|array_record>-00000-of-0000N
Every record is a tf.train.Example {"image": PNG bytes, "label": int64}, the bytes TFDS
writes (codecs/tfds_encode.py, codecs/tfpng.py). A TFRecord shard is records back to back, each
uint64 length, uint32 masked CRC-32C of the length, data, uint32 masked CRC-32C of the
data (mnistconv.codecs.framing); an ArrayRecord shard holds the same records
through the array-record package (group_size:1, TFDS' own setting). The number of
shards is --shards, else the encoded size over --shard-size, else TFDS' rule (64 MiB to
1 GiB a shard: one for MNIST); records are cut into shards as TFDS cuts them.

Reading takes DIR, DIR/<name> or DIR/<name>/<version> (with or without a config level),
of any image classification dataset with one grayscale uint8 Image and one ClassLabel,
including what TFDS writes. Every claim is checked before it is believed: each shard's
record count against shardLengths, numBytes against the records, the images against
features.json's shape, the labels against numClasses; a missing or truncated shard is
an error naming it.

    ds = mnistconv.read("data/mnist")
    mnistconv.write(ds, "tfds_data", "tfds")       # tfds_data/mnist/1.0.0/...
    # tfds.builder_from_directory("tfds_data/mnist/1.0.0").as_dataset(split="train")
"""

import glob
import os
import tempfile

import numpy as np

from ... import registry
from ...errors import BadOption, CorruptData, FormatError, InTheWay, NoSplits, Truncated, UsageError
from ...fileio import StagedOutput, check_input_file, create_staged, input_root, \
    open_input, output_entries, remove_scratch
from ...parallel import ParallelEncoder, check_workers
from ...records import NO_PROGRESS, Dataset, Split, WriteResult, OutputFile
from ...shards import check_shard_count, SHARD_RE
from ...staging import check_output_path, exists_error, is_staging_name, \
    signals_deferred, staging_prefix
from ...limits import MAX_SHARDS, is_number, printable
from ...codecs import spool as shardwrite, tfds_encode as encode
from . import info as tfds_info

METADATA = ("dataset_info.json", "features.json")


# --- writing ---------------------------------------------------------------------

def parse_size(value, option="--shard-size"):
    """Bytes with a unit: 64MB, 256MiB, 1G (K, M, G count 1024s), 1 KB to 1 TB, else
    exit 2. (A bare number is refused: webdataset's --shard-size counts samples.)"""
    text = str(value).strip().upper()
    for suffix in ("IB", "B"):
        if text.endswith(suffix):
            text = text[:-len(suffix)]
            break
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}.get(text[-1:])
    number = text[:-1]
    size = None
    # ASCII digits, few enough that float() stays finite (1e400 would be infinity).
    if scale and is_number(number.replace(".", "", 1)) and len(number) <= 20:
        size = int(float(number) * scale)
    if size is None or not 1 << 10 <= size <= 1 << 40:
        raise BadOption(None, f"{option} must be bytes with a unit, e.g. 256MB or 1GiB "
                               f"(1KB to 1TB), not {printable(value)}")
    return size


def shard_count(shards, shard_size, total_bytes, count, split, where):
    """A split's shard count: --shards, else --shard-size bytes each, else TFDS' rule."""
    if shards is not None:
        n = shards
    elif shard_size is not None:
        n = min(MAX_SHARDS, max(1, -(-(total_bytes + 16 * count) // shard_size)))
        n = min(n, max(1, count))
    else:
        n = tfds_info.tfds_shard_count(total_bytes, count)
    if n > count:
        raise UsageError(where, f"--shards {n} but split {split} has {count} examples",
                         "every shard holds one example at least")
    return n


def stale_files(directory, keep):
    """TFDS files of an earlier write in directory that the new one does not write
    (other shard counts, splits or file format): removed on commit, with force."""
    entries = output_entries(directory)
    stale = []
    for entry in entries:
        if entry in keep or is_staging_name(entry):
            continue
        if entry in METADATA or entry.endswith(".labels.txt") or \
                (SHARD_RE.match(entry) and (".tfrecord-" in entry or
                                            ".array_record-" in entry)):
            stale.append(entry)
    return stale


def _nearest_existing(path):
    path = os.path.abspath(path)
    while not os.path.isdir(path):
        path = os.path.dirname(path)
    return path


def checked(dataset, path, o, force=False):
    """write()'s checks of options o (SPEC.options()), all made before any output
    exists, and what they decide: (name, version, shards, shard_size, workers, target
    directory, [(split name, split, (H, W))], (H, W), number of classes, class names).
    A sharded write (plan.py) starts from them too, so a shard written alone is cut and
    encoded as in the whole set."""
    name = tfds_info.check_name(o.name if o.name is not None else
                                tfds_info.family_name(dataset))
    version = tfds_info.check_version(o.version)
    shards, shard_size, file_format = o.shards, o.shard_size, o.file_format
    if shards is not None and shard_size is not None:
        raise UsageError(None, "--shards and --shard-size both say how to cut shards",
                         "give one of them")
    shards = None if shards is None else check_shard_count(shards)
    shard_size = None if shard_size is None else parse_size(shard_size)
    workers = check_workers(o.workers)
    if file_format == "array_record":
        shardwrite.array_record_module()
    if str(path) == "-":
        raise UsageError("-", "a TFDS directory cannot be written to stdout", "name an output directory")
    if not dataset.splits:
        raise NoSplits(path, "nothing to write: the input has no splits")
    target = os.path.join(str(path), name, version)
    check_output_path(target, path)  # a linked name or version folder: refused first
    if os.path.exists(target) and not os.path.isdir(target):
        raise InTheWay(target, "exists and is not a directory")
    if not force and os.path.isdir(target) and output_entries(target, path):
        raise exists_error(target)

    plan = []
    num_classes = 0
    for split_name, split in dataset.splits.items():
        where = split.header.source or split_name
        tfds_info.check_split_name(split_name, where)
        shape = encode.image_shape(split, "TFDS")
        if split.header.count == 0:
            raise UsageError(where, f"split {split_name} has no examples", "TFDS splits "
                                    "hold one at least")
        num_classes = max(num_classes, encode.check_labels(split, "TFDS"))
        if shards is not None and shards > split.header.count:
            raise UsageError(where, f"--shards {shards} but split {split_name} has "
                                    f"{split.header.count} examples",
                             "every shard holds one example at least")
        plan.append((split_name, split, shape))
    shapes = {shape for _, _, shape in plan}
    if len(shapes) > 1:
        raise UsageError(path, f"splits have different image shapes ({sorted(shapes)})",
                               "one TFDS features.json describes them all")
    shape = shapes.pop()
    names = tfds_info.class_names(name, [s for _, s, _ in plan], num_classes)
    return (name, version, shards, shard_size, workers, target, plan, shape, num_classes,
            names)


def write(dataset, path, *, force=False, progress=NO_PROGRESS, **options) -> WriteResult:
    """Write a TFDS prepared directory: path/<name>/<version>/ (see the module
    docstring). name: the TFDS dataset name (default: the input's family, e.g. mnist);
    shards: files per split (default: TFDS' rule, or shard_size bytes each);
    file_format: tfrecord or array_record. workers/processes as mnistconv.parallel.

        result = write(ds, "tfds_data", name="mnist", version="3.0.1")
        result.counts   # {'train': 60000, 'test': 10000}
    """
    from . import SPEC
    o = SPEC.options(options)
    name, version, shards, shard_size, workers, target, plan, shape, num_classes, names \
        = checked(dataset, path, o, force)
    file_format = o.file_format

    scratch = None
    try:
        # Signals wait until the scratch folder is known, so `finally` removes it.
        with signals_deferred():
            scratch = tempfile.mkdtemp(prefix=staging_prefix("tfds"),
                                       dir=_nearest_existing(target))
        spooled = []  # (split, lengths, spool path)
        tasks = [encode.ExampleTask(num_classes, shape)]
        for task in tasks:
            task.warm()
        with ParallelEncoder(tasks, workers, o.processes, int(np.prod(shape)),
                             encode.chunk_records(shape),
                             total=sum(s.header.count for _, s, _ in plan)) as encoder:
            for split_name, split, _ in plan:
                spool = os.path.join(scratch, split_name)
                with shardwrite.naming_failures(target):
                    create_staged(spool).close()
                    lengths = shardwrite.spool_split(split, tasks[0], encoder, spool,
                                                     progress, f"{split_name} -> tfds")
                spooled.append((split_name, lengths, spool))
        layout = []  # (split, numBytes, shard lengths, targets)
        for split_name, lengths, spool in spooled:
            count = len(lengths)
            n = shard_count(shards, shard_size, int(lengths.sum()), count, split_name,
                             path)
            bounds = tfds_info.tfds_bounds(count, n)
            layout.append((split_name, lengths, spool, bounds,
                           [tfds_info.shard_name(name, split_name, file_format, i, n)
                            for i in range(n)]))
        file_names = list(METADATA) + ["label.labels.txt"] + \
            [t for *_, targets in layout for t in targets]
        files, counts = [], {}
        with StagedOutput(force, root=path) as staged:
            stage = staged.directory(target, file_names,
                                     replaces=stale_files(target, set(file_names)))
            for file_name, data in metadata_files(
                    name, version, file_format,
                    [(s, int(lengths.sum()), np.diff([0] + bounds).tolist())
                     for s, lengths, _, bounds, _ in layout], shape, num_classes, names):
                with create_staged(os.path.join(stage, file_name)) as f:
                    f.write(data)
                files.append(_output(os.path.join(target, file_name), data))
            for split_name, lengths, spool, bounds, targets in layout:
                staged_paths = [os.path.join(stage, t) for t in targets]
                for p in staged_paths:
                    create_staged(p).close()
                full = [os.path.join(target, t) for t in targets]
                if file_format == "tfrecord":
                    files += shardwrite.tfrecord_shards(spool, lengths, bounds, full,
                                                        staged_paths)
                else:
                    files += shardwrite.array_record_shards(spool, lengths, bounds, full,
                                                            staged_paths, "group_size:1")
                counts[split_name] = len(lengths)
    finally:
        if scratch:
            remove_scratch(scratch)
    return WriteResult(files, counts, {"records": sum(counts.values()),
                                       "shards": sum(len(t) for *_, t in layout)})


def metadata_files(name, version, file_format, splits, shape, num_classes, names):
    """(file name, bytes) of dataset_info.json, features.json and label.labels.txt;
    splits: [(split name, numBytes, shard lengths)]."""
    info_text = tfds_info.dataset_info_json(name, version, file_format, splits)
    return [(file_name, text.encode("utf-8")) for file_name, text in (
        ("dataset_info.json", info_text),
        ("features.json", tfds_info.features_json(shape, num_classes)),
        ("label.labels.txt", "\n".join(names) + "\n"))]


def _output(path, data):
    import hashlib
    return OutputFile(path, len(data), hashlib.sha256(data).hexdigest())


# --- reading ---------------------------------------------------------------------

class TfdsSplit(Split):
    """A split of a TFDS directory: its shards read as TFRecord or ArrayRecord, the
    header carrying features.json's class count and label.labels.txt's names.

        split = mnistconv.read("tfds_data/mnist/1.0.0").splits["train"]
        split.header.class_names[:3]      # ('0', '1', '2')
    """

    def __init__(self, name, inner, meta):
        names = tuple(meta.class_names or ())
        header = inner.header.with_(num_classes=meta.num_classes, class_names=names,
                                    source=meta.directory)
        super().__init__(name, header)
        self.inner = inner
        self.tfds_name = meta.name

    def batches(self, batch_size=None):
        """The inner reader's batches (TFRecord or ArrayRecord shards, in order)."""
        return self.inner.batches(batch_size) if batch_size else self.inner.batches()

    def labels(self):
        """Every label (from the index built when the shards were opened)."""
        return self.inner.labels()

    def indices(self):
        """Positions in the split (TFDS records carry no original index)."""
        return self.inner.indices()

    def take(self, positions):
        """Images at positions (random access for ArrayRecord shards)."""
        return self.inner.take(positions)


def find_directory(path):
    """The <name>/<version> directory under path holding dataset_info.json."""
    path = str(path)
    if os.path.isfile(os.path.join(path, "dataset_info.json")):
        return path
    found = []
    for depth in ("*", "*/*", "*/*/*"):
        found += [os.path.dirname(f) for f in sorted(glob.glob(
            os.path.join(glob.escape(path), depth, "dataset_info.json")))
            if not any(is_staging_name(p) for p in os.path.relpath(f, path).split(os.sep))]
        if found:
            break
    if not found:
        raise UsageError(path, "holds no dataset_info.json (not a TFDS dataset directory)",
                         "name a TFDS dataset directory (<name>/<version>/)")
    if len(found) > 1:
        shown = ", ".join(os.path.relpath(f, path) for f in found[:3])
        raise UsageError(path, f"holds {len(found)} TFDS datasets ({shown}"
                               f"{', ...' if len(found) > 3 else ''})",
                         "name one of them, e.g. " + os.path.join(path,
                         os.path.relpath(found[0], path)))
    return found[0]


def _tfrecord_counts(path):
    """(records, bytes of record data) of an uncompressed TFRecord file, walking the
    length fields (their CRCs and the data are checked when the records are read)."""
    count = data = 0
    size = os.path.getsize(path)
    with open_input(path) as f:  # confined by read() (check_input_file)
        at = 0
        while at < size:
            head = f.read(8)
            if len(head) < 8:
                raise Truncated(path, f"truncated: record {count} (counting from 0) "
                                        f"is cut short at byte {at}")
            n = int.from_bytes(head, "little")
            if at + 16 + n > size:
                raise Truncated(path, f"truncated: record {count} (counting from 0) "
                                        f"claims {n:,} bytes, the file ends "
                                        f"{size - at - 16:,} bytes later")
            f.seek(n + 8, 1)
            at += n + 16
            count += 1
            data += n
    return count, data


def read(path, split_name=None, workers=None) -> Dataset:
    """Read a TFDS prepared directory (DIR, DIR/<name> or DIR/<name>/<version>): one
    split per entry of dataset_info.json, every claim checked (module docstring).
    workers: threads decoding images (None: one per core).

        ds = read("tfds_data")
        ds.splits["test"].header.count     # 10000
    """
    root = input_root(path)
    directory = find_directory(path)
    meta = tfds_info.Info(directory, root)
    if (meta.image_key, meta.label_key) != ("image", "label"):
        raise FormatError(os.path.join(directory, "features.json"),
                          f"features {meta.image_key!r} and {meta.label_key!r}", "mnistconv "
                          "reads TFDS image classification records keyed image and label")
    splits, paths = {}, []
    info_path = os.path.join(directory, "dataset_info.json")
    for name, (lengths, num_bytes) in meta.splits.items():
        files = meta.shard_files(name)
        for f in files:
            if not os.path.lexists(f):
                raise FormatError(f, f"missing: dataset_info.json lists {len(files)} "
                                     f"shards for split {name}",
                                  "copy the missing shard, or download the dataset again")
            check_input_file(f, root)
        if meta.file_format == "tfrecord":
            inner, data_bytes = _tfrecord_split(name, files, lengths, info_path, workers)
            if num_bytes is not None and num_bytes != data_bytes:
                raise CorruptData(info_path, f"split {name}: numBytes says "
                                             f"{num_bytes:,}, its records hold "
                                             f"{data_bytes:,} bytes")
        else:
            # TFDS' ArrayRecord data files, read by that format's reader (a format
            # reaches another through the registry, never by import).
            reader = registry.get("arrayrecord").load()
            inner = reader.ArrayRecordSplit(name, files, workers=workers, expected=lengths,
                                            claimed_by=info_path)
        shape = tuple(inner.header.shape)
        if shape != tuple(meta.shape):
            raise CorruptData(os.path.join(directory, "features.json"),
                              f"says images are {meta.shape[0]} x {meta.shape[1]} x 1, "
                              f"split {name}'s records hold "
                              f"{' x '.join(map(str, shape))}")
        labels = inner.labels()
        if len(labels) and int(labels.max()) >= meta.num_classes:
            raise CorruptData(inner.files[0], f"label {int(labels.max())} is not below "
                                              f"numClasses {meta.num_classes} "
                                              "(features.json)")
        splits[name] = TfdsSplit(name, inner, meta)
        paths += files
    return Dataset("tfds", splits, paths)


def _tfrecord_split(name, files, lengths, info_path, workers):
    TFRecordSplit = registry.get("tfrecord").load().TFRecordSplit
    total_data = 0
    for f, expected in zip(files, lengths):
        count, data = _tfrecord_counts(f)
        if count != expected:
            raise CorruptData(f, f"holds {count:,} records, dataset_info.json says "
                                 f"{expected:,} (shardLengths)")
        total_data += data
    inner = TFRecordSplit(name, files, "tfds", "none", workers)
    return inner, total_data


def sniff(path) -> bool:
    """A directory holding dataset_info.json and features.json, here or up to three
    levels below (DIR/<name>/<config>/<version>)."""
    path = str(path)
    if not os.path.isdir(path):
        return False
    for depth in ("", "*", "*/*", "*/*/*"):
        pattern = os.path.join(glob.escape(path), depth, "dataset_info.json")
        for f in glob.glob(pattern):
            if os.path.isfile(os.path.join(os.path.dirname(f), "features.json")):
                return True
    return False


def matches_name(path) -> bool:
    """TFDS directories are found by content only."""
    return False
