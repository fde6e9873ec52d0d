"""Writing WebDataset (layout in format.py): each split's samples encoded on one or more
workers into tar shards cut by samples or bytes.

Only shards cut by samples can be written one at a time (mnistconv.formats.contract): shard k
holds samples k*size up to (k+1)*size of its split, keyed by their position in the
split, and its bytes depend on those samples only. Where a shard cut by bytes starts
follows the encoded size of every sample before it.
"""

import os
import re
from dataclasses import dataclass

import numpy as np

from ..contract import Counters, ShardTarget, ShardedWrite
from ...errors import BadOption, CorruptData, FormatError, NoSplits, UsageError
from ...io.fileio import HashingWriter, is_stream_path, open_staged, output_entries
from ...io import budget
from ...limits import (MAX_SHARDS, SIZE_UNITS_HELP, check_num_classes, is_number, parse_bytes,
                       printable)
from ...workers.parallel import ParallelEncoder, check_workers
from ...model.records import OutputFile
from ...codecs.tar import END, RECORD, end_of_archive
from ...codecs.images import class_labels, grayscale_shape
from .. import extras
from ...codecs.samples import SampleTask, default_samples, pack, split_output

CHUNK = 1000  # records per work unit (as TFRecord's writer: see there)
DEFAULT_SHARD_SIZE = "100000"  # webdataset.ShardWriter's default maxcount
JSON_KEYS = ("index", "class")  # a .json's own keys; the others are extra fields


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
    a unit (limits.parse_bytes: "100MB", "1GiB"); the other is None."""
    text = str(value).strip()
    # ASCII digits, at most 18 (int() refuses over 4300; no shard needs 10**18)
    if is_number(text) and len(text) <= 18 and int(text) >= 1:
        return int(text), None
    try:
        return None, parse_bytes(value, "--shard-size")
    except BadOption:
        pass
    raise BadOption(None, f"--shard-size must be a number of samples (10000) or of "
                           f"bytes with a unit (100MB, 1GiB; {SIZE_UNITS_HELP}), not "
                           f"{printable(value)}")


def sample_pieces(split, chunk, samples_per_shard, slot_bytes, first=0, table=None):
    """(0, packed rows, labels, indices) of at most `chunk` records, never across a
    shard cut by samples; the first record's key is `first`. table: the split's extra
    fields (row 0 its first record), or None."""
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
    """One split's shards, opened as samples arrive, cut by samples or bytes, each
    staged (at staged(target)) and hashed."""

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
        self.file = open_staged(self.staged(self.target))
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


@dataclass
class WebDatasetCounters(Counters):
    """A shard's samples (its records), and 1 (the shard)."""

    shards: int = 0


class WebDatasetWrite(ShardedWrite):
    """Every split's tar shards. Cut by samples, each shard is a target, its bytes the
    same written alone; cut by bytes, a split is one target whose shards follow each
    other (the first at its staged path, the others staged beside it): written only in
    order. An empty split gets one empty shard."""

    counters = WebDatasetCounters

    def __init__(self, dataset, path, options):
        path = str(path)
        if is_stream_path(path):
            raise UsageError(path, "WebDataset shards are files, not a stream",
                             "name a directory or <name>.tar")
        self.options = options
        samples, self.max_bytes = parse_shard_size(options.shard_size or DEFAULT_SHARD_SIZE)
        self.samples = {}  # samples per shard of each split (None: cut by bytes)
        self.workers = check_workers(options.workers)
        if not dataset.splits:
            raise NoSplits(path, "nothing to write: the input has no splits")
        self.directory, self.name = output_names(path)
        self.plan = []  # (split, SampleTask, extra fields table or None)
        for split in dataset.splits.values():
            where = split.header.source or split.name
            shape = grayscale_shape(split, where, "WebDataset", colour=True)
            if "-" in split.name:
                raise UsageError(where, f"split name {printable(split.name)} holds '-', "
                                        "which shard names <name>-<split>-000000.tar use "
                                        "to mark the split", "rename it with --split-name")
            labels = class_labels(split, where, "a .cls is one integer class per sample")
            if len(labels):
                check_num_classes(int(labels.max()) + 1, where)
            if samples and -(-split.header.count // samples) > MAX_SHARDS:
                raise UsageError(None, f"--shard-size {samples} cuts split {split.name} "
                                       f"into more than {MAX_SHARDS} shards",
                                 "choose a larger --shard-size")
            self.samples[split.name] = samples if options.shard_size else \
                default_samples(samples, split.header.count)
            width = max(6, len(str(max(split.header.count - 1, 0))))
            extra = extras.checked(split, JSON_KEYS)
            task = SampleTask(shape, options.image_format, options.jpeg_quality, width,
                              split.header.class_names, extra_names=extra[0] if extra else ())
            self.plan.append((split, task, extra[1] if extra else None))
        if any(table is not None for _, _, table in self.plan):
            extras.kept(dataset)  # every sample's .json holds them
        self.chunk = budget.piece_rows(max(t.slot_shape[0] for _, t, _ in self.plan), CHUNK)
        self.targets, self.stale = [], []
        self.staged = None  # a local write's StagedOutput (the shards cut by bytes)
        for split, _, _ in self.plan:
            count = split.header.count
            size = self.samples[split.name] or max(count, 1)  # by bytes: the split
            for k in range(max(1, -(-count // size))):
                self.targets.append(ShardTarget(
                    split.name, k, os.path.join(self.directory,
                                                shard_name(self.name, split.name, k)),
                    min(count, k * size), min(count, (k + 1) * size)))
            keep = {os.path.abspath(t.path) for t in self.targets}
            self.stale += [p for p in self.family(split.name)
                           if os.path.abspath(p) not in keep]

    def family(self, split):
        """Shards of this name and split already in the directory."""
        pattern = re.compile(re.escape(f"{self.name}-{split}-") + r"\d{6}\.tar$")
        return [os.path.join(self.directory, e) for e in output_entries(self.directory)
                if pattern.match(e)]

    def shared(self, records):
        """Encoders of every split's samples. A record's room in a forked worker's slot,
        twice the size given plus 2 KB, fits three headers and paddings, a PNG of noise
        and the .json's extra fields (a 64-character name and an int32 each)."""
        tasks = [task for _, task, _ in self.plan]
        tasks[0].warm()
        room = max(t.slot_shape[0] + 40 * len(t.extra_names) for t in tasks) + 1024
        return ParallelEncoder(tasks, self.workers, self.options.processes, room,
                               self.chunk, total=records)

    def stage(self, staged, target):
        """The shard's staged path (shards cut by bytes: their split's first)."""
        self.staged = staged
        return super().stage(staged, target)

    def check_plannable(self):
        """Shards cut by bytes are written in order only."""
        if self.max_bytes:
            # (parse_shard_size took it: digits and a unit, nothing to escape)
            raise UsageError(None, f"--shard-size {self.options.shard_size} cuts "
                                   "WebDataset shards by bytes: where each starts follows "
                                   "every sample's encoded size, so they cannot be planned",
                             "plan with a number of samples per shard, e.g. "
                             "--shard-size 10000")

    def outputs(self):
        """Shards cut by bytes: how many there are follows every sample's encoded size."""
        if self.max_bytes:
            raise UsageError(None, f"--shard-size {self.options.shard_size} cuts "
                                   "WebDataset shards by bytes: how many there are follows "
                                   "every sample's encoded size, known only once written",
                             "give a number of samples per shard, e.g. --shard-size 10000")
        return super().outputs()

    def write_targets(self, targets, paths):
        """Shards of one split at paths, from one pass over its samples (cut by bytes:
        the split's one target, its later shards staged as they open)."""
        from ...model.stream import RangeSplit
        t = targets[0]
        by_path = {x.path: paths[x.index] for x in targets}
        start, stop = t.start, targets[-1].stop
        split, task, table = next(p for p in self.plan if p[0].name == t.split)
        count, whole = split.header.count, (start, stop) == (0, split.header.count)
        shards = ShardWriter(lambda path: by_path.get(path) or self.staged.file(path),
                             self.directory, self.name, t.split, self.samples[t.split],
                             self.max_bytes)
        shards.number = t.index
        written = 0
        pieces = sample_pieces(split if whole else RangeSplit(split, start, stop),
                               self.chunk, self.samples[t.split], task.slot_shape[0],
                               first=start,
                               table=None if table is None else table[start:stop])
        with self.session(stop - start) as encoder:
            for _, n, data, (length, _, _) in encoder.encode(task, pieces):
                shards.add(*split_output(data, length, n))
                written += n
                self.advance(n)
        files = shards.close()
        if written != stop - start:
            where, said = split.header.source or t.split, \
                f"yielded {start + written} examples, its header says {count}"
            raise CorruptData(where, said) if whole else \
                FormatError(where, said, "check the input")
        if len(targets) == 1:  # (cut by bytes: its shards)
            return {t.path: ((files[0] if len(files) == 1 else files),
                             WebDatasetCounters(written, len(files)))}
        return {x.path: (f, WebDatasetCounters(x.stop - x.start, 1))
                for x, f in zip(targets, files)}

    def stats(self, counters):
        """write()'s stats: samples and shards."""
        return {"samples": counters.records, "shards": counters.shards}


def prepare_write(dataset, path, options) -> WebDatasetWrite:
    """The write of dataset's shards to path with options (SPEC.options())."""
    return WebDatasetWrite(dataset, path, options)
