"""WebDataset: each split as tar shards `<name>-<split>-000000.tar`, `-000001.tar`, ...

A shard is a plain ustar archive (byte layout in codecs/tar.py) holding, for each sample in
order, three members named by the sample's key, its position in the split zero-padded
to at least 6 digits (keys sort in sample order, the same in every shard):
    <key>.cls   the class index as ASCII text, e.g. b"7"
    <key>.json  {"index": <original index>, "class": "<class name>"} (json.dumps; the
                name is the class's number when the input records no names), then
                the record's extra fields if it has any (QMNIST's columns:
                "hsf_series": 4, "writer_id": 12, ...)
    <key>.png   the image, grayscale PNG (or <key>.jpg with image_format="jpeg")
in that order (sorted by extension, as webdataset.TarWriter writes them). Every header
has mtime 0, uid/gid 0, mode 0644 and empty user and group names, so a conversion gives
the same bytes on every run and for any number of workers. Shards are cut by samples
(shard_size="10000") or by bytes (shard_size="100MB": no shard file larger, unless one
sample alone is).

`webdataset.WebDataset("d/mnist-train-{000000..000005}.tar").decode("l")` yields
{"__key__", "cls", "json", "png"} samples from them; so does any tar reader.

Reading takes a directory of shards, a shard (its whole set, checked complete) or any
tar file of samples: members grouped by key as webdataset groups them (the name up to
the first dot of its last path part); each sample needs an image (.png, .jpg, .jpeg) and
a .cls; .json's "index" is the original index when present; its other keys whose values
are integers in the split's first sample are the split's extra fields (every sample must
hold them, int32; keys of other types are ignored); other members are ignored.
A split's name is the word before the shard number (`mnist-train-000000.tar` is train).
"""

import json
import os
import re

import numpy as np

from ... import codecs
from ...errors import (BadImage, BadOption, CorruptData, FormatError, NoSplits, NotFound,
    OverLimit, Truncated, UsageError)
from ...fileio import HashingWriter, StagedOutput, input_entries, is_stream_path, \
    open_input, open_staged, output_entries
from ... import budget
from ...limits import MAX_EXAMPLES, MAX_SHARDS, check_image_size, check_index, \
    check_num_classes, printable, safe_split_name
from ...parallel import ParallelEncoder, check_workers
from ...records import DEFAULT_BATCH, NO_PROGRESS, Batch, Dataset, Header, OutputFile, \
    Split, WriteResult
from ...shards import in_split_order, is_data_name
from ...codecs.tar import BLOCK, END, RECORD, end_of_archive, looks_like_tar, members
from ...codecs.classes import check_name, names_by_label
from ...codecs.images import class_labels, decode_image, grayscale_shape
from .. import extras
from ...codecs.samples import SampleTask, default_samples, pack, split_output

CHUNK = 1000  # records per work unit (as TFRecord's writer: see there)
DEFAULT_SHARD_SIZE = "100000"  # webdataset.ShardWriter's default maxcount
IMAGE_EXTENSIONS = ("png", "jpg", "jpeg")
_SHARD_NAME = re.compile(r"^(?P<stem>.+?)(?:-(?P<shard>\d{6}))?\.tar$", re.IGNORECASE)
_KEY = re.compile(r"^((?:.*/|)[^./]+)\.([^/]*)$")  # webdataset's base_plus_ext
_UNITS = {"b": 1, "kb": 10 ** 3, "mb": 10 ** 6, "gb": 10 ** 9, "tb": 10 ** 12,
          "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40}
_SMALL_MEMBER = 1 << 16  # a .cls or .json larger than this is not a label or an index
_JSON_KEYS = ("index", "class")  # a .json's own keys; the others are extra fields


# ---- names ----

def matches_name(path) -> bool:
    """The name says WebDataset: a .tar file."""
    return str(path).lower().endswith(".tar")


def sniff(path) -> bool:
    """A tar file, or a directory holding one."""
    if os.path.isdir(path):
        return any(_is_tar(p) for p in _tars_in(path, _is_tar_name)[:3])
    return _is_tar(path)


def _is_tar_name(name):
    return name.lower().endswith(".tar") and is_data_name(name)


def _tars_in(directory, keep):
    """The names keep() accepts in a folder, each checked by the input walker (a link
    out of the folder, a FIFO or a device among them is refused)."""
    return input_entries(directory or ".", None, keep, "file")


def _is_tar(path):
    if not os.path.isfile(path):  # a FIFO or device: opening it would block
        return False
    try:
        with open_input(path) as f:
            return looks_like_tar(f.read(BLOCK))
    except OSError:
        return False


def output_names(path):
    """(directory, name) of an output path: `out/mnist.tar` writes out/mnist-<split>-...,
    a directory `out/` writes out/out-<split>-..."""
    path = str(path)
    if path.endswith(os.sep) or os.path.isdir(path):
        return path, os.path.basename(os.path.abspath(path)) or "data"
    directory, name = os.path.split(path)
    if name.lower().endswith(".tar"):
        name = name[:-4]
    return directory or ".", name


def shard_name(name, split, number):
    """The file name of shard `number` of a split.

        shard_name("mnist", "train", 0)  # 'mnist-train-000000.tar'
    """
    return f"{name}-{split}-{number:06d}.tar"


def parse_shard_size(value):
    """(samples, bytes) from --shard-size: a number of samples ("10000"), or bytes with
    a unit ("100MB", "1GiB", "512kB"); the other is None."""
    text = str(value).strip().lower().replace(" ", "")
    # ASCII digits, at most 18 (int() refuses over 4300; no shard needs 10**18)
    m = re.fullmatch(r"([0-9]{1,18})([kmgt]i?b|b)?", text)
    if m is None or int(m[1]) < 1:
        raise BadOption(None, f"--shard-size must be a number of samples (10000) or of "
                               f"bytes with a unit (100MB, 1GiB), not {printable(value)}")
    if m[2] is None:
        return int(m[1]), None
    return None, int(m[1]) * _UNITS[m[2]]


# ---- writing ----

def _check_split(split, where):
    shape = grayscale_shape(split, where, "WebDataset")
    if "-" in split.name:
        raise UsageError(where, f"split name {printable(split.name)} holds '-', which "
                                "shard names <name>-<split>-000000.tar use to mark the split",
                         "rename it with --split-name")
    labels = class_labels(split, where, "a .cls is one integer class per sample")
    if len(labels):
        check_num_classes(int(labels.max()) + 1, where)
    return shape


def sample_pieces(split, chunk, samples_per_shard, slot_bytes, first=0, table=None):
    """(0, packed rows, labels, indices) of at most `chunk` records that never cross a
    shard boundary when shards are cut by samples; the first record's key is `first`
    (its position in the whole split). table: the split's extra fields (row 0 is its
    first record), or None."""
    position = first
    for batch in split.batches(chunk):
        start = 0
        while start < len(batch):
            end = min(len(batch), start + chunk)
            if samples_per_shard:
                left = samples_per_shard - position % samples_per_shard
                end = min(end, start + left)
            rows = None if table is None else \
                table[position - first:position - first + end - start]
            yield (0, pack(position, batch.images[start:end], slot_bytes, rows),
                   np.asarray(batch.labels[start:end], np.int64),
                   np.asarray(batch.indices[start:end], np.int64))
            position += end - start
            start = end


class ShardWriter:
    """The shards of one split being written: opened as samples arrive, cut by samples
    or bytes, each staged and hashed."""

    def __init__(self, staged, directory, name, split, samples, max_bytes):
        self.staged, self.directory, self.name, self.split = staged, directory, name, split
        self.samples, self.max_bytes = samples, max_bytes
        self.out = None
        self.number = 0
        self.files = []

    def _open(self):
        if self.number >= MAX_SHARDS:
            raise UsageError(None, f"split {self.split} needs more than {MAX_SHARDS} "
                                   "shards", "choose a larger --shard-size")
        self.target = os.path.join(self.directory, shard_name(self.name, self.split,
                                                               self.number))
        self.file = open_staged(self.staged.file(self.target))
        self.out = HashingWriter(self.file)
        self.count = self.offset = 0

    def _finish(self):
        self.out.write(end_of_archive(self.offset))
        self.file.close()
        self.files.append(OutputFile(self.target, self.out.bytes, self.out.sha256()))
        self.out = None
        self.number += 1

    def add(self, body, sizes):
        """Append whole samples (body: their bytes, sizes: each one's length)."""
        i, at, n = 0, 0, len(sizes)
        while i < n:
            if self.out is None:
                self._open()
            take = n - i
            if self.samples:
                take = min(take, self.samples - self.count)
            if self.max_bytes:
                ends = self.offset + np.cumsum(sizes[i:i + take], dtype=np.int64)
                closed = ends + len(END)
                closed += -closed % RECORD
                fits = int(np.count_nonzero(closed <= self.max_bytes))
                take = max(fits, 1 if self.count == 0 else 0)
            length = int(sizes[i:i + take].sum(dtype=np.int64))
            self.out.write(body[at:at + length])
            self.count += take
            self.offset += length
            i += take
            at += length
            if i < n or (self.samples and self.count == self.samples):
                self._finish()

    def close(self):
        """Finish the last shard (an empty split still gets one, empty)."""
        if self.out is None and self.number == 0:
            self._open()
        if self.out is not None:
            self._finish()
        return self.files


def family(directory, name, split):
    """Shards of this name and split already in the directory."""
    pattern = re.compile(re.escape(f"{name}-{split}-") + r"\d{6}\.tar$")
    return [os.path.join(directory, e) for e in output_entries(directory)
            if pattern.match(e)]


def checked(dataset, path, o):
    """write()'s checks of options o (SPEC.options()), made before any output exists,
    and what they decide: (directory, name, samples per shard or None, bytes per shard
    or None, workers, [(split, SampleTask)], records per piece). A sharded write
    (plan.py) starts from them too, so a shard written alone is cut and encoded as in
    the whole set."""
    path = str(path)
    if is_stream_path(path):
        raise UsageError(path, "WebDataset shards are files, not a stream",
                         "name a directory or <name>.tar")
    shard_size = o.shard_size
    samples, max_bytes = parse_shard_size(shard_size or DEFAULT_SHARD_SIZE)
    per_split = {}  # samples per shard of each split (None: cut by bytes)
    workers = check_workers(o.workers)
    if not dataset.splits:
        raise NoSplits(path, "nothing to write: the input has no splits")
    directory, name = output_names(path)
    plan = []
    for split in dataset.splits.values():
        where = split.header.source or split.name
        shape = _check_split(split, where)
        if samples and -(-split.header.count // samples) > MAX_SHARDS:
            raise UsageError(None, f"--shard-size {samples} cuts split {split.name} into "
                                   f"more than {MAX_SHARDS} shards",
                             "choose a larger --shard-size")
        per_split[split.name] = default_samples(samples, split.header.count) \
            if not shard_size else samples
        width = max(6, len(str(max(split.header.count - 1, 0))))
        extra = extras.checked(split, _JSON_KEYS)
        task = SampleTask(shape, o.image_format, o.jpeg_quality, width,
                          split.header.class_names, extra_names=extra[0] if extra else ())
        plan.append((split, task, extra[1] if extra else None))
    slot = max(task.slot_shape[0] for _, task, _ in plan)
    return directory, name, per_split, max_bytes, workers, plan, \
        budget.piece_rows(slot, CHUNK)


def record_room(tasks):
    """A record's output room in a forked worker's slot is twice this plus 2 KB: three
    headers, three paddings and a PNG of noise fit, and the .json's extra fields (a name
    of at most 64 characters and an int32 each)."""
    return max(t.slot_shape[0] + 40 * len(t.extra_names) for t in tasks) + 1024


def write(dataset, path, *, force=False, progress=NO_PROGRESS, **options) -> WriteResult:
    """Write every split as tar shards `<name>-<split>-000000.tar` in the directory
    `path` (name: its own) or beside `path` named `<name>.tar`. shard_size: samples
    ("10000"; default: samples.default_samples) or bytes ("100MB") per shard; workers:
    encoding threads (processes=True: forked), the same bytes for any number. An
    earlier set of the same name and split is replaced whole (force=True), never mixed.
        write(mnistconv.read("data/mnist"), "shards/mnist.tar", shard_size="10000")
        # shards/mnist-train-000000.tar ... -000005.tar, shards/mnist-test-000000.tar
    """
    from . import SPEC
    o = SPEC.options(options)
    directory, name, samples, max_bytes, workers, plan, chunk = checked(dataset, path, o)
    files, counts = [], {}
    if any(table is not None for _, _, table in plan):
        extras.kept(dataset)
    with StagedOutput(force, root=path) as staged:
        old = {s.name: family(directory, name, s.name) for s, _, _ in plan}
        for stale in old.values():
            if stale and not force:
                staged.supersede(stale[0])  # refused: the output exists
        tasks = [task for _, task, _ in plan]
        tasks[0].warm()
        with ParallelEncoder(tasks, workers, o.processes, record_room(tasks), chunk,
                             total=sum(s.header.count for s, _, _ in plan)) as encoder:
            for split, task, table in plan:
                shards = ShardWriter(staged, directory, name, split.name,
                                 samples[split.name], max_bytes)
                progress.start(f"{split.name} -> webdataset", split.header.count)
                counts[split.name] = 0
                try:
                    pieces = sample_pieces(split, chunk, samples[split.name],
                                     task.slot_shape[0], table=table)
                    for _, n, data, (length, _, _) in encoder.encode(task, pieces):
                        body, sizes = split_output(data, length, n)
                        shards.add(body, sizes)
                        counts[split.name] += n
                        progress.advance(n)
                finally:
                    progress.finish()
                written = shards.close()
                if counts[split.name] != split.header.count:
                    raise CorruptData(split.header.source or split.name,
                                      f"yielded {counts[split.name]} examples, its header "
                                      f"says {split.header.count}")
                targets = {os.path.abspath(f.path) for f in written}
                for stale in old[split.name]:
                    if os.path.abspath(stale) not in targets:
                        staged.supersede(stale)
                files += written
    return WriteResult(files, counts, {"samples": sum(counts.values()),
                                       "shards": len(files)})


# ---- reading ----

class WebDatasetSplit(Split):
    """A split's samples found in its shards: labels, indices and where each image
    lies are read once (read() time); images are read and decoded by batches()."""

    def __init__(self, name, files):
        self.files = files
        where = files[0]
        names, file_numbers, offsets, sizes, labels, indices = [], [], [], [], [], []
        shape = None
        class_names = {}  # label -> the first name a .json gives it
        extra_names, extra_rows = None, []  # the first sample's integer .json keys
        extra_error = None  # why they are not extra fields of every sample
        for number, path in enumerate(files):
            for key, member_name, at, size, label, index, class_name, head, meta in \
                    _samples(path):
                if len(labels) >= MAX_EXAMPLES:
                    raise OverLimit(where, f"holds more than {MAX_EXAMPLES:,} samples, "
                                             "mnistconv's limit for one split")
                found = codecs.image_size(head) if codecs.image_kind(head) != "raw" \
                    else None
                if found is None:
                    raise BadImage(path, f"member {printable(member_name)} is not an "
                                            "image (PNG or JPEG)")
                if shape is None:
                    check_image_size(found, path, f"member {printable(member_name)}")
                    shape = found
                elif found != shape:
                    raise FormatError(path, f"member {printable(member_name)} is a "
                                            f"{found[0]}x{found[1]} image, the split's "
                                            f"images are {shape[0]}x{shape[1]}",
                                      "every image of a split has one size")
                names.append(member_name)
                file_numbers.append(number)
                offsets.append(at)
                sizes.append(size)
                labels.append(label)
                indices.append(len(indices) if index is None else index)
                if class_name is not None:
                    class_names.setdefault(label, class_name)
                if extra_error is None:
                    member = printable(meta[0] if meta else f"{key}.json")
                    obj = meta[1] if meta else {}
                    try:
                        if extra_names is None:
                            extra_names = extras.integer_keys(obj, _JSON_KEYS, path,
                                                              member)
                        row = extras.json_values(obj, extra_names, _JSON_KEYS, path,
                                                 member)
                    except FormatError as e:
                        # Said only to a writer that keeps extra fields (extra_fields()):
                        # another tool's .json (an id past int32, a key some samples
                        # lack) must not stop a conversion that drops them anyway.
                        extra_error, extra_rows = e, []
                    else:
                        if extra_names:
                            extra_rows.append(row)
        self._extra_error = extra_error
        self._extra_names = extra_names or ()
        self._extras = np.array(extra_rows, np.int32).reshape(len(extra_rows),
                                                              len(self._extra_names))
        self._names = names
        self._files = np.array(file_numbers, np.int32)
        self._offsets = np.array(offsets, np.int64)
        self._sizes = np.array(sizes, np.int64)
        labels = np.array(labels, np.int64)
        if len(labels):
            check_num_classes(int(labels.max()) + 1, where)
        self._labels = labels.astype(np.uint8) if len(labels) and labels.max() < 256 \
            else labels
        self._indices = np.array(indices, np.int64)
        super().__init__(name, Header(len(labels), shape or (0, 0), np.dtype(np.uint8),
                                      self._labels.dtype, None, where,
                                      names_by_label(class_names, int(labels.max()) + 1
                                                     if len(labels) else 0)))

    def labels(self):
        """Every sample's class, in order (read at read() time)."""
        return self._labels

    def extra_fields(self):
        """(names, N x k int32) of the integer keys every sample's .json holds beside
        index and class (QMNIST's columns), else None; a FormatError when some sample's
        do not match the first's."""
        if self._extra_error is not None:
            raise self._extra_error
        return (self._extra_names, self._extras) if self._extra_names else None

    def indices(self):
        """Every sample's original index (its .json's, else its position)."""
        return self._indices

    def batches(self, batch_size=DEFAULT_BATCH):
        handles = {}
        try:
            for start, end in budget.spans(self.header.count,
                                           budget.rows(self.header, batch_size)):
                images = np.empty((end - start,) + tuple(self.header.shape), np.uint8)
                for i in range(start, end):
                    number = int(self._files[i])
                    if number not in handles:
                        handles[number] = open_input(self.files[number])
                    f = handles[number]
                    f.seek(int(self._offsets[i]))
                    data = f.read(int(self._sizes[i]))
                    images[i - start] = self._decode(data, i, number)
                yield Batch(images, self._labels[start:end], self._indices[start:end])
        finally:
            for f in handles.values():
                f.close()

    def _decode(self, data, i, number):
        return decode_image(data, tuple(self.header.shape), self.files[number],
                            self._names[i])


def _samples(path):
    """(key, image member name, image offset, image size, label, original index and
    class name from its .json or None, image bytes, (.json member name, its object) or
    None) of each sample of one tar file, in order."""
    with open_input(path) as f:
        current, fields = None, {}
        for member_name, at, size in members(f, path):
            m = _KEY.match(member_name)
            if m is None or os.path.basename(member_name).startswith("__"):
                continue  # no extension, or webdataset's __meta__ entries
            key, ext = m[1], m[2].lower()
            if key != current:
                if current is not None:
                    yield _sample(path, current, fields)
                current, fields = key, {}
            if ext in fields or (ext in IMAGE_EXTENSIONS and "image" in fields):
                raise CorruptData(path, f"sample {printable(key)} has two "
                                        f"{'images' if ext in IMAGE_EXTENSIONS else '.' + ext}")
            if ext in IMAGE_EXTENSIONS:
                fields["image"] = (member_name, at, size, f.read(size))
            elif ext in ("cls", "json"):
                if size > _SMALL_MEMBER:
                    raise CorruptData(path, f"member {printable(member_name)} holds {size:,} "
                                            f"bytes, too many for a {ext}")
                fields[ext] = (member_name, f.read(size))
        if current is not None:
            yield _sample(path, current, fields)


def _sample(path, key, fields):
    if "image" not in fields:
        raise FormatError(path, f"sample {printable(key)} has no image (.png or .jpg)",
                          "each sample needs an image (.png or .jpg) and a .cls")
    if "cls" not in fields:
        raise FormatError(path, f"sample {printable(key)} has no .cls (class index)",
                          "each sample needs an image (.png or .jpg) and a .cls")
    member_name, text = fields["cls"]
    value = text.strip()
    if not re.fullmatch(rb"\d{1,18}", value):
        raise FormatError(path, f"member {printable(member_name)} holds "
                                f"{printable(value.decode('utf-8', 'replace'), 40)}, not "
                                "a class index", "a .cls holds a number such as 7")
    index = name = meta = None
    if "json" in fields:
        json_name, text = fields["json"]
        try:
            meta = json.loads(text)
        except (ValueError, RecursionError):  # RecursionError: arrays nested ~1000 deep
            raise CorruptData(path, f"member {printable(json_name)} is not JSON") from None
        if isinstance(meta, dict) and type(meta.get("index")) is int:
            index = check_index(meta["index"], path, f"member {printable(json_name)}")
        if isinstance(meta, dict) and isinstance(meta.get("class"), str):
            name = check_name(meta["class"], path, f"member {printable(json_name)}")
        meta = (json_name, meta) if isinstance(meta, dict) else None
    image_name, at, size, data = fields["image"]
    return key, image_name, at, size, int(value), index, name, data, meta


def _split_of(file_name):
    """(prefix, split, shard number or None) of a tar file's name."""
    m = _SHARD_NAME.match(file_name)
    stem = m["stem"] if m else file_name
    prefix, _, split = stem.rpartition("-")
    return prefix, split, int(m["shard"]) if m and m["shard"] else None


def _shard_sets(path):
    """{split: [files in order]} for a directory or one tar file."""
    if os.path.isdir(path):
        directory = path
        entries = [os.path.basename(e) for e in _tars_in(path, _is_tar_name)]
        if not entries:
            raise FormatError(path, "holds no .tar shards", "check the path: WebDataset shards end in .tar")
    elif not os.path.exists(path) and path.lower().endswith(".tar"):
        # The name the shards were written under: out/mnist.tar is every split's set
        # out/mnist-<split>-000000.tar, ...
        directory, own = os.path.split(path)
        entries = [os.path.basename(e) for e in _tars_in(
            directory, lambda e: is_data_name(e) and _split_of(e)[0] == own[:-4]
            and _split_of(e)[2] is not None)]
        if not entries:
            raise NotFound(path, "no such file, nor shards named after it "
                                    f"({printable(own[:-4] + '-<split>-000000.tar')})")
    else:
        directory, own = os.path.split(path)
        prefix, split, number = _split_of(own)
        if number is None:
            return {safe_split_name(split, path): [path]}
        entries = [os.path.basename(e) for e in _tars_in(
            directory, lambda e: _is_tar_name(e) and _split_of(e)[:2] == (prefix, split))]
    groups = {}
    for entry in entries:
        prefix, split, number = _split_of(entry)
        safe_split_name(split, os.path.join(directory, entry))
        groups.setdefault(split, []).append((prefix, number, entry))
    sets = {}
    for split, shards in groups.items():
        prefixes = sorted({p for p, _, _ in shards})
        if len(prefixes) > 1:
            raise FormatError(path, f"holds shards of split {split} under two names "
                                    f"({', '.join(printable(p) for p in prefixes[:2])})",
                              "keep one set per directory, or read one shard file")
        numbers = [n for _, n, _ in shards]
        if None in numbers and len(shards) > 1:
            raise FormatError(path, f"split {split} has a .tar without a shard number "
                                    "beside numbered shards", "number it like the others, or move it away")
        if None not in numbers:
            missing = sorted(set(range(max(numbers) + 1)) - set(numbers))
            if missing:
                raise FormatError(path, f"shard {missing[0]:06d} of split {split} is "
                                        "missing", "a shard set is numbered from 000000 "
                                                   "without gaps")
        shards.sort(key=lambda m: m[1] or 0)
        sets[split] = [os.path.join(directory, e) for _, _, e in shards]
    return {s: sets[s] for s in in_split_order(sets)}


def _check_shard(path):
    """A shard must be a regular, non-empty file (a tar holds at least its end blocks)."""
    if not os.path.isfile(path):
        raise FormatError(path, "is not a regular file (device, FIFO or socket)",
                          "name a regular file or a directory")
    if os.path.getsize(path) == 0:
        raise Truncated(path, "is empty, not a tar file")


def read(path) -> Dataset:
    """WebDataset shards as a dataset: a directory of `<name>-<split>-000000.tar`
    shards, one shard (its whole set), one tar file of samples, or the name the shards
    were written under (`out/mnist.tar`: every split's set `out/mnist-<split>-*.tar`). Each sample's label
    comes from its .cls, its original index from its .json; images are decoded when
    batches() are read.

        ds = read("shards/")
        ds.splits["train"].header.count   # 60000
    """
    sets = _shard_sets(str(path))
    for files in sets.values():
        for f in files:
            _check_shard(f)
    splits = {name: WebDatasetSplit(name, files) for name, files in sets.items()}
    return Dataset("webdataset", splits, [f for files in sets.values() for f in files])
