"""ArrayRecord files of tf.train.Example records, written and read with the
array-record package (the `arrayrecord` extra; it needs Python 3.11 or later).

An ArrayRecord file is a Riegeli file: 64-byte blocks headers every 64 KiB, chunks of
records (zstd level 3 by default), each checked by a HighwayHash, and a footer holding
the offset of every chunk, which is what makes reading record i alone possible; it
starts with Riegeli's 64-byte file signature (83 af 70 d1 0d 88 4a 3f ...), which
sniff() looks for. Every record here is a serialized tf.train.Example as TFDS writes
it ({"image": PNG bytes, "label": int64}, codecs/tfds_encode.py), group_size:1 by
default so any record is read alone (TFDS' and Grain's setting); other writer options
pass through --array-record-options and are checked by array_record itself.

One split goes to the path itself, several beside it as <stem>-<split>.array_record (or
<dir>/<split>.array_record), a shard set as DST-00000-of-0000N (mnistconv.io.shards).
Reading parses every record once for its label; take() reads and decodes only the
records asked for, so --per-class and --shuffle on a large file decode only what they keep.
"""

import contextlib
import os

import numpy as np

from ... import codecs
from ...errors import CorruptData, FormatError, MnistconvError, NoSplits, UsageError
from ...io.fileio import check_input_file, has_magic, input_size, \
    library_path
from ...io import budget
from ...limits import (MAX_THREADED_IMAGE_PIXELS, check_num_classes,
                       printable)
from ...workers.parallel import ParallelEncoder, check_workers, ordered_map
from ...model.records import DEFAULT_BATCH, Batch, Dataset, Header, Split
from ...io.shards import ShardSet, check_shard_count, other_shard_sets, resolve_inputs, \
    sniff_files
from ...codecs import spool as shardwrite, tfds_encode as encode
from ..contract import Counters, ShardTarget, ShardedWrite
from ...codecs.images import check_record_size, decode_all, decode_record_image, \
    first_image_shape
from ...codecs.png import threads_for_pngs
from ...codecs.example import example_class, feature_values, find_layout, one_value, \
    parse_example, record_name

EXTENSION = ".array_record"
# Riegeli's file signature: the first 64 bytes of every Riegeli (so ArrayRecord) file.
SIGNATURE = bytes.fromhex(
    "83af70d10d884a3f00000000000000004000000000000000"
    "91bac23c9287e1a90000000000000000e19f13c0e9b1c372"
    "73000000000000000000000000000000")
# Records read at once while indexing: _READ, fewer when _READ_BYTES / largest record,
# and never from two chunks (groups) at once: array_record decodes a whole chunk for any
# record of it, so a read that spans chunks holds them all, and a few records of
# millions of labels must not sit in memory together. Where each record is its own
# chunk (group_size:1, what mnistconv and TFDS write) that is one record at a time.
_READ = 4096
_READ_BYTES = 16 << 20
_DEFAULT_GROUP = 65536  # array_record's group_size when the options do not name one


def matches_name(path) -> bool:
    """A .array_record name, or a shard of one (TFDS' <name>-<split>.array_record-N)."""
    name = os.path.basename(str(path).rstrip("/")).lower()
    return name.endswith(EXTENSION) or f"{EXTENSION}-" in name


def split_target(path, split, several):
    """<dir>/<split>.array_record for a directory, the path for one split, else
    <stem>-<split>.array_record beside it."""
    path = str(path)
    if path.endswith(os.sep) or os.path.isdir(path):
        return os.path.join(path, f"{split}{EXTENSION}")
    if not several:
        return path
    directory, name = os.path.split(path)
    stem = name[:-len(EXTENSION)] if name.lower().endswith(EXTENSION) else name
    return os.path.join(directory, f"{stem}-{split}{EXTENSION}")


def resolve(path) -> dict:
    """{split: [files]} for a file, a shard, a glob, a directory or a name write() was
    given (shards.resolve_inputs)."""
    return resolve_inputs(path, (EXTENSION,), matches_name, EXTENSION)


def open_reader(module, path, options=""):
    """An ArrayRecordReader whose footer read, else a FormatError naming the file; the
    file opened through the guard (fileio.library_path). options: the reader's own
    ("readahead_buffer_size:0" for random access)."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:  # array_record takes UTF-8 names only (a TypeError)
        raise FormatError(path, "the file's name is not UTF-8, and array_record opens "
                                "only UTF-8 names", "rename the file") from None
    check_input_file(path)  # confined where it was found (shards.resolve_inputs)
    try:
        with library_path(path) as guarded:
            reader = module.ArrayRecordReader(guarded, options) if options else \
                module.ArrayRecordReader(guarded)
    except (RuntimeError, ValueError) as e:
        why, reader = str(e), None
    else:
        if reader.ok():
            return reader
        try:
            reader.read_all()
            why = "its footer does not read"
        except RuntimeError as e:
            why = str(e)
        with contextlib.suppress(RuntimeError):  # closing says the failure again
            reader.close()
    why = why.split(";")[0]
    raise FormatError(path, f"not a readable ArrayRecord file ({printable(why, 120)[1:-1]})",
                      "was it cut short or overwritten? write it again")


def _check_claimed_size(path, number, image, shape):
    """The size an image's header claims is the first image's, else a FormatError."""
    claimed = codecs.image_size(image)
    if claimed is not None and claimed != tuple(shape[:2]):
        raise CorruptData(path, f"record {number} (counting from 0): image is "
                                f"{claimed}, the first was {tuple(shape)}")


def _decode_into(out, images, shape):
    """Decode [(place, path, record number, image bytes)] into out[place]: plain PNGs
    together, the rest one by one (which names a record that does not decode)."""
    # Straight into out, unless repeated records leave places between.
    decoded = out if len(images) == len(out) else np.empty((len(images),) + shape, np.uint8)

    def decode_one(k, image):
        _, path, number, _ = images[k]
        pixels = decode_record_image(path, number, image)
        if pixels.shape != shape:
            raise CorruptData(path, f"record {number} (counting from 0): image is "
                                    f"{pixels.shape}, the first was {shape}")
        return pixels
    decode_all([image for *_, image in images], decoded, decode_one)
    if decoded is not out:
        out[[place for place, *_ in images]] = decoded


def _named_options(options):
    """{name: value} of an ArrayRecord options string ('group_size:4,zstd:3')."""
    pairs = (part.partition(":") for part in options.split(","))
    return {key.strip(): value.strip() for key, _, value in pairs}


def _group_size(options):
    """Records per chunk, from the writer's options string."""
    value = _named_options(options).get("group_size", "")
    return max(1, int(value)) if value.isdigit() else _DEFAULT_GROUP


class ArrayRecordSplit(Split):
    """One split: ArrayRecord files of Examples, read by record number.

        split = mnistconv.read("mnist-train.array_record").splits["train"]
        split.take([5, 59999])        # reads and decodes those two records only
    """

    can_seek = True

    def __init__(self, name, files, workers=None, expected=None, claimed_by=None):
        module = shardwrite.array_record_module()
        self.files = list(files)
        self.workers = check_workers(workers)
        self.Example = example_class()
        self.readers = [open_reader(module, f) for f in self.files]
        self.counts = [r.num_records() for r in self.readers]
        if expected is not None:
            for f, n, want in zip(self.files, self.counts, expected):
                if n != want:
                    raise CorruptData(f, f"holds {n:,} records, "
                                         f"{os.path.basename(claimed_by)} says {want:,} "
                                         "(shardLengths)")
        self.starts = np.concatenate([[0], np.cumsum(self.counts)]).astype(np.int64)
        labels, indices = [], []
        self.layout = None
        self._png = False  # the first image is a PNG
        shape = label = index = None
        for f, reader, count in zip(self.files, self.readers, self.counts):
            at, block, largest, last = 0, 1, 1, None
            group = _group_size(reader.writer_options_string())
            while at < count:
                end = min(count, at + block, (at // group + 1) * group)
                for data in self._read(f, reader, at, end):
                    if data != last:  # a repeated record reads as the one before it
                        last = data
                        largest = max(largest, len(data))
                        if shape is not None:
                            check_record_size(f, at, len(data), shape)
                        example = self._parse(f, at, data)
                        if self.layout is None:
                            self.layout = find_layout(example, "auto", f, at)
                        image, label, index = self._fields(f, at, example)
                        if shape is None:
                            shape = first_image_shape(f, at, image)
                            self._png = codecs.image_kind(image) == "png"
                            # zstd and repeated records: a bomb's work (budget.py).
                            budget.check_expansion(
                                ", ".join(self.files), int(self.starts[-1]),
                                budget.image_bytes(shape),
                                sum(input_size(p) for p in self.files))
                        else:  # every size now: none decoded before a bad one is seen
                            _check_claimed_size(f, at, image, shape)
                    labels.append(label)
                    indices.append(len(indices) if index is None else index)
                    at += 1
                block = max(1, min(_READ, _READ_BYTES // largest))
        # No records: an empty split, as array_record reads it (no image tells the size).
        shape = shape or (0, 0)
        labels = np.array(labels, np.int64)
        self._labels = labels.astype(np.uint8) if not len(labels) or (
            labels.min() >= 0 and labels.max() < 256) else labels
        self._indices = np.array(indices, np.int64)
        width = self.layout.label_width if self.layout is not None and \
            self.layout.label_format == "onehot" else None
        super().__init__(name, Header(len(labels), shape, np.dtype(np.uint8),
                                      self._labels.dtype, width, ", ".join(self.files)))

    def _read(self, path, reader, start, end):
        try:
            return reader.read(start, end)
        except RuntimeError as e:
            raise FormatError(path, f"records {start}..{end - 1} do not read "
                                    f"({printable(str(e).split(';')[0], 100)[1:-1]})",
                              "the file is damaged") from None

    def _parse(self, path, number, data):
        return parse_example(self.Example, path, number, data)

    def _fields(self, path, number, example):
        feature = example.features.feature
        layout = self.layout
        images = feature_values(path, number, feature, layout.image_key, "bytes_list")
        if len(images) != 1:
            raise CorruptData(path, f"{record_name(number)}: expected one image, found "
                                    f"{len(images)}")
        values = feature_values(path, number, feature, layout.label_key, "int64_list")
        if layout.label_format == "onehot":
            # The count before the values: a record may hold millions of them.
            hot = list(values) if len(values) == layout.label_width else None
            if hot is None or hot.count(1) != 1 or hot.count(0) != len(hot) - 1:
                raise CorruptData(path, f"{record_name(number)}: label is not one-hot "
                                        f"over {layout.label_width} classes")
            label = hot.index(1)
        elif len(values) != 1:
            raise CorruptData(path, f"{record_name(number)}: expected one label value, "
                                    f"found {len(values)}")
        else:
            label = values[0]
            if label < 0:
                raise CorruptData(path, f"{record_name(number)}: label {label} is "
                                        "negative")
            # 2**31 - 1 was taken, and `info` counted it in a bincount of that size.
            check_num_classes(label + 1, path, f"{record_name(number)}: label {label}")
        index = one_value(path, number, feature, layout.index_key, "int64_list") \
            if layout.index_key else None
        return images[0], label, index

    def _decode_records(self, pieces):
        """Images of (file number, [record numbers in that file]) pieces, in order."""
        shape = tuple(self.header.shape)
        total = sum(len(numbers) for _, numbers in pieces)
        out = np.empty((total,) + shape, np.uint8)
        place = 0
        images = []  # (place, path, record number, image bytes), decoded together
        repeats = []  # places whose record is the one before it, which they copy
        try:
            for k, numbers in pieces:
                path, reader = self.files[k], self.readers[k]
                if len(numbers) and numbers[-1] - numbers[0] == len(numbers) - 1:
                    records = self._read(path, reader, int(numbers[0]),
                                         int(numbers[-1]) + 1)
                else:
                    try:
                        records = reader.read([int(n) for n in numbers])
                    except RuntimeError as e:
                        raise CorruptData(path, f"records do not read "
                                                f"({printable(e, 100)})") from None
                last = None
                for number, data in zip(numbers, records):
                    if data == last:  # a repeated record decodes as the one before it
                        repeats.append(place)
                        place += 1
                        continue
                    last = data
                    image, _, _ = self._fields(path, int(number),
                                               self._parse(path, int(number), data))
                    _check_claimed_size(path, number, image, shape)
                    images.append((place, path, int(number), image))
                    place += 1
        except MnistconvError:
            _decode_into(out, images, shape)  # an earlier record's error comes first
            raise
        _decode_into(out, images, shape)
        for place in repeats:
            out[place] = out[place - 1]
        return out

    def _pieces(self, positions):
        """[(file number, record numbers in it)] for split positions, in order."""
        positions = np.asarray(positions, np.int64)
        files = np.searchsorted(self.starts, positions, side="right") - 1
        cuts = np.flatnonzero(np.diff(files)) + 1
        return [(int(files[a]), positions[a:b] - self.starts[files[a]])
                for a, b in zip([0, *cuts], [*cuts, len(positions)]) if a < b]

    def batches(self, batch_size=DEFAULT_BATCH):
        """The split's examples in order, decoded a batch at a time on threads."""
        count = self.header.count
        batch_size = budget.rows(self.header, batch_size)
        jobs = (self._pieces(np.arange(s, min(count, s + batch_size)))
                for s in range(0, count, batch_size))
        workers = self.workers if count > batch_size and \
            int(np.prod(self.header.shape)) <= MAX_THREADED_IMAGE_PIXELS else 1
        if self._png:
            workers = threads_for_pngs(workers, self.header.shape)
        start = 0
        for images in ordered_map(self._decode_records, jobs, workers):
            n = len(images)
            yield Batch(images, self._labels[start:start + n].copy(),
                        self._indices[start:start + n].copy())
            start += n

    def take(self, positions):
        """Images at positions (any order): only those records are read and decoded."""
        positions = np.asarray(positions, np.int64)
        if len(positions) == 0:
            return np.zeros((0,) + tuple(self.header.shape), np.uint8)
        if positions.min() < 0 or positions.max() >= self.header.count:
            raise IndexError("position out of range")
        return self._decode_records(self._pieces(positions))

    def labels(self):
        """Every label (parsed when the split was opened)."""
        return self._labels

    def indices(self):
        """The records' "index" feature, else their positions."""
        return self._indices


def read(path, split_name=None, workers=None) -> Dataset:
    """Read ArrayRecord files of Examples: a file, a shard set (any shard, or a glob), a
    directory, or the name write() was given. workers: threads decoding images.

        ds = read("mnist-train.array_record")
        ds.splits["train"].take([0, 1]).shape      # (2, 28, 28)
    """
    groups = resolve(path)
    splits = {name: ArrayRecordSplit(name, files, workers)
              for name, files in groups.items()}
    return Dataset("arrayrecord", splits, [f for fs in groups.values() for f in fs])


def sniff(path) -> bool:
    """Content says ArrayRecord: Riegeli's file signature. A directory: it holds such
    .array_record files."""
    return sniff_files(path, matches_name, lambda p: has_magic(p, SIGNATURE))


def writer_options(group_size=1, array_record_options=None) -> str:
    """The options string handed to ArrayRecordWriter, checked by array_record."""
    options = f"group_size:{int(group_size)}"
    if array_record_options:
        extra = str(array_record_options).strip().strip(",")
        if "group_size" in _named_options(extra):
            raise UsageError(None, "--array-record-options names group_size",
                             "use --group-size")
        options += "," + extra
    return shardwrite.check_writer_options(options)


class ArrayRecordWrite(ShardedWrite):
    """Every split as ArrayRecord files of TFDS-style Examples: one split to `path`,
    several to <stem>-<split>.array_record; shards=N cuts each into N files. A split's
    Examples are encoded once into a spool (codecs/spool.py) when its first shard is
    written; each shard is its range of the spool.

        mnistconv.write(ds, "mnist.array_record", shards=4)
    """

    def __init__(self, dataset, path, options):
        o, path, self.options = options, str(path), options
        shardwrite.array_record_module()
        self.spooled: dict = {}  # split name -> [record lengths, spool] (in a session)
        self.writer_options = writer_options(o.group_size, o.array_record_options)
        shards = check_shard_count(1 if o.shards is None else o.shards)
        self.workers = check_workers(o.workers)
        if path == "-":
            raise UsageError("-", "ArrayRecord cannot be written to stdout (its index is at "
                                  "the end of the file)", "name an output file")
        if not dataset.splits:
            raise NoSplits(path, "nothing to write: the input has no splits")
        self.plan, self.targets, self.stale, num_classes = {}, [], [], 0
        for name, split in dataset.splits.items():
            shape = encode.image_shape(split, "ArrayRecord")
            num_classes = max(num_classes, encode.check_labels(split, "ArrayRecord"))
            if shards > max(1, split.header.count):
                raise UsageError(split.header.source or name, f"--shards {shards} but split "
                                 f"{name} has {split.header.count} examples",
                                 "pass fewer --shards")
            shard_set = ShardSet(split_target(path, name, len(dataset.splits) > 1),
                                 split.header.count, shards)
            self.targets += [ShardTarget(name, i, *r) for i, r in enumerate(shard_set.ranges())]
            self.stale += other_shard_sets(shard_set.base, shard_set.targets)
            self.plan[name] = (split, shape)
        self.tasks = {shape: encode.ExampleTask(num_classes, shape)
                      for _, shape in self.plan.values()}

    @contextlib.contextmanager
    def shared(self, records):
        """A scratch folder for the spools, and the encoder of every split's Examples."""
        near = os.path.dirname(os.path.abspath(self.targets[0].path))
        with shardwrite.scratch_folder(near, "arrayrecord") as scratch:
            for task in self.tasks.values():
                task.warm()
            with ParallelEncoder(list(self.tasks.values()), self.workers,
                                 self.options.processes, max(int(np.prod(s)) for s in self.tasks),
                                 min(encode.chunk_records(s) for s in self.tasks),
                                 total=records) as encoder:
                yield scratch, encoder

    def write_shard(self, index, staged_path):
        """Shard `index` at staged_path (its split spooled first): (OutputFile, Counters)."""
        t = self.targets[index]
        split, shape = self.plan[t.split]
        with self.session(t.stop - t.start) as (scratch, encoder):
            if t.split not in self.spooled:
                [(_, *self.spooled[t.split])] = shardwrite.spool_splits(
                    [(t.split, split, self.tasks[shape], t.path)], encoder, scratch,
                    self.progress, "arrayrecord")
            lengths, spool = self.spooled[t.split]
            written = shardwrite.array_record_shard(spool, lengths, t.start, t.stop, t.path,
                                                    staged_path, self.writer_options)
        return written, Counters(len(lengths[t.start:t.stop]))

    def stats(self, counters):
        return {"records": counters.records}


prepare_write = ArrayRecordWrite
