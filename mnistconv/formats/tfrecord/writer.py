"""Writing TFRecord: each split to one file or a shard set (mnistconv.io.shards), its records
encoded in chunks that never cross a shard on one or more workers (mnistconv.workers.parallel),
appended in order, compressed and hashed as they go. A chunk's bytes depend only on its
records: the output is the same for any number of workers, and for a shard written
alone (TFRecordWrite).
"""

import os
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from ... import codecs
from .. import extras
from ...errors import FormatError, NoSplits, UsageError
from ...io.parallel_gzip import DeflateWriter
from ...io.fileio import (HashingWriter, is_stdio, open_staged,
                       output_file_info)
from ...limits import check_num_classes
from ...workers.parallel import ParallelEncoder, check_workers
from ...io import budget
from ...model.records import OutputFile
from ...io.shards import ShardSet, check_shard_count, other_shard_sets
from ..contract import Counters, ShardTarget, ShardedWrite
from ...codecs.framing import Framer
from .index_files import IndexWriter, index_path
from .names import INDEX_SUFFIX, split_target

CHUNK = 1000  # records per work unit: small per-chunk costs, flat memory
# The JPEG error is measured on the first 1/ERROR_SAMPLE of each chunk: decoding all
# costs more than the C reference's margin (benchmarks/README.md).
ERROR_SAMPLE = 16


@dataclass(eq=False)  # tasks are told apart by identity (ParallelEncoder)
class Settings:
    """How one split's records are encoded: ParallelEncoder's task (plain attributes,
    inherited by forked workers)."""

    schema: Any
    image_format: str
    label_format: str
    quality: int
    num_classes: int
    shape: tuple
    with_index: bool
    exact_error: bool
    # Known class names add a label_name bytes feature (nothing when there are none).
    class_names: tuple = ()
    # (names, N x k int32 table) of the split's extra fields, or None: then the pieces'
    # indices are positions picking rows here and in `original` (inherited by workers).
    extras: Any = None
    original: Any = None

    def __post_init__(self):
        self.class_names = tuple(self.class_names)
        self.extra_names = self.extras[0] if self.extras is not None else ()
        # For JPEG padded to whole 8x8 blocks, which fill() does while it copies.
        self.slot_shape = codecs.block_padded_shape(*self.shape) \
            if self.image_format == "jpeg" else tuple(self.shape)

    def key(self):
        """What the Example templates depend on."""
        return (self.schema.name, self.image_format, self.label_format, self.quality,
                self.num_classes, self.shape, self.with_index, self.class_names,
                self.extra_names)

    def encode(self, images, labels, indices):
        """encode_records() of a chunk (ParallelEncoder's call)."""
        return encode_records(self, images, labels, indices)

    def fill(self, out, images):
        """Copy a chunk's images into out (n x slot_shape), padded to JPEG blocks."""
        images = np.asarray(images).reshape((len(images),) + tuple(self.shape))
        if out.shape[1:] != images.shape[1:]:
            codecs.pad_to_blocks(images, out=out)
        else:
            out[:] = images

    def warm(self):
        """Import the codecs and build the Example templates now: forked workers
        inherit them instead of each paying for them."""
        _builder(self)[0].warm()
        if self.image_format != "raw":
            codecs.load_encoder(self.image_format)
        if self.image_format == "jpeg":
            codecs.simplejpeg_module()


_BUILDERS = {}  # (settings key, thread) -> (ExampleBuilder, Framer): they keep caches


def _builder(settings):
    key = (settings.key(), threading.get_ident())
    hit = _BUILDERS.get(key)
    if hit is None:
        from ...codecs.example import ExampleBuilder
        hit = _BUILDERS[key] = (ExampleBuilder.of(settings), Framer())
    return hit


def encode_records(settings, images, labels, indices):
    """Framed TFRecord bytes of a chunk, and the JPEG pixel error as (sum, max, number
    of records measured). images: n x settings.shape, or n x settings.slot_shape."""
    n = len(labels)
    images = np.asarray(images)
    err_sum, err_max, measured = 0, 0, 0
    prefix, suffix = b"", b""
    if settings.image_format == "jpeg":
        measured = n if settings.exact_error else -(-n // ERROR_SAMPLE)
        prefix, blobs, err_sum, err_max = codecs.encode_jpeg_measured(
            images, settings.quality, settings.shape, measured)
        suffix = codecs.EOI
    else:
        images = np.ascontiguousarray(images).reshape((n,) + settings.shape)
        if settings.image_format == "png" and images.ndim == 4:
            # RGB: mnistconv's own unfiltered PNGs (tf.io.decode_png reads them
            # exactly). codecs/tfpng copies tf.image.encode_png's RGB bytes too (the
            # TFDS and ArrayRecord writers use it); switching TFRecord's RGB to it
            # changes its output bytes and speed, so it waits for a bench to decide.
            from ...codecs.png import encode_batch
            data, offsets = encode_batch(images)
            data = bytes(data)
            blobs = [data[a:b] for a, b in zip(offsets.tolist(), offsets.tolist()[1:])]
        elif settings.image_format == "png":
            # tf.image.encode_png's bytes (TFDS' own), a batch at a time.
            from ...codecs import tfpng as png
            prefix, blobs, suffix = png.png_parts(images)
        else:
            blobs = [im.tobytes() for im in images]
    builder, framer = _builder(settings)
    labels = np.asarray(labels)
    if settings.with_index or settings.extras is not None:
        # An index or extra fields differ per record: each is serialized whole.
        columns = [labels.tolist(), [prefix + blob + suffix for blob in blobs]]
        if settings.extras is None:
            columns.append(np.asarray(indices).tolist())
        else:
            positions = np.asarray(indices, np.int64)
            columns.append(settings.original[positions].tolist() if settings.with_index
                           else [0] * n)
            columns.append(settings.extras[1][positions].tolist())
        return framer.frame_all(map(builder.serialize, *columns)), \
            (err_sum, err_max, measured)
    return (framer.frame_spliced(builder, labels.tolist(), prefix, blobs, suffix),
            (err_sum, err_max, measured))


class _Output:
    """One output file being written: staged path, hashing, optional compression."""

    def __init__(self, target, staged_path, compression, index_staged=None):
        self.target = target
        self.index_staged = index_staged
        self.index = IndexWriter() if index_staged else None
        self.file = open_staged(staged_path)
        self.hashing = HashingWriter(self.file)
        self.sink = {"none": lambda f: f, "gzip": DeflateWriter,
                     "zlib": lambda f: DeflateWriter(f, "zlib")}[
            compression](self.hashing)

    def write(self, data):
        """Append encoded records (compressed and hashed on the way)."""
        self.sink.write(data)
        if self.index is not None:
            self.index.add(data)

    def close(self) -> list:
        """Finish the file (and write its index at its staged place): their OutputFiles."""
        if self.sink is not self.hashing:
            self.sink.close()
        self.file.close()
        files = [OutputFile(str(self.target), self.hashing.bytes, self.hashing.sha256())]
        if self.index is not None:
            self.index.save(self.index_staged)
            info = output_file_info(self.index_staged)
            files.append(OutputFile(index_path(self.target), info.bytes, info.sha256))
        return files


def _chunks(split, bounds, chunk, positions=False):
    """(output number, images, labels, indices) pieces of at most `chunk` records, cut at
    the outputs' end positions (bounds); with positions, positions stand for indices."""
    position, out = 0, 0
    for batch in split.batches(chunk):
        start = 0
        n = len(batch)
        while start < n:
            while out < len(bounds) - 1 and position >= bounds[out]:
                out += 1
            end = min(n, start + bounds[out] - position) if bounds[out] > position else n
            end = min(end, start + chunk)
            indices = np.arange(position, position + end - start, dtype=np.int64) \
                if positions else np.asarray(batch.indices[start:end], dtype=np.int64)
            yield (out, batch.images[start:end], np.asarray(batch.labels[start:end]),
                   indices)
            position += end - start
            start = end


def _range_pieces(split, start, stop, chunk, positions=False):
    """_chunks()'s pieces of records start..stop of a seekable split."""
    labels = np.asarray(split.labels())
    indices = None if positions else np.asarray(split.indices(), np.int64)
    at = start
    while at < stop:
        end = min(stop, (at // chunk + 1) * chunk)
        here = np.arange(at, end, dtype=np.int64)
        yield (0, split.take(here), labels[at:end],
               here if positions else indices[at:end])
        at = end


def _check_labels(labels, where):
    """Labels are integers from 0, few enough classes for a one-hot row (not copied)."""
    labels = np.asarray(labels)
    if labels.ndim != 1:
        raise FormatError(where, f"labels of shape {labels.shape}", "TFRecord labels are "
                                 "one class per example")
    if labels.dtype.kind not in "iu":
        what = labels.dtype.name
        if labels.dtype.kind == "f" and len(labels) and not np.isfinite(labels).all():
            what += " holding NaN or infinity"
        raise FormatError(where, f"labels are {what}", "TFRecord labels are integer classes "
                                 "0, 1, 2, ...")
    if len(labels) == 0:
        return
    low, high = int(labels.min()), int(labels.max())
    if low < 0:
        raise FormatError(where, f"label {low} is negative", "TFRecord labels are classes "
                                 "0, 1, 2, ...")
    check_num_classes(high + 1, where, "labels")


@dataclass
class TFRecordCounters(Counters):
    """A shard's records, and its JPEG error: sum, max, records and pixels measured."""

    MAXED = ("error_max",)
    error_sum: int = 0
    error_max: int = 0
    measured: int = 0
    pixels: int = 0


class TFRecordWrite(ShardedWrite):
    """A TFRecord shard set written shard by shard (mnistconv.formats.contract): a
    shard's bytes (and JPEG error sample) are the same written alone or with the whole
    set. Plain TFRecord has nothing to finish: the shards are the output (and, written
    locally, their index files)."""

    counters = TFRecordCounters

    def __init__(self, dataset, path, options):
        check_workers(options.workers)
        if options.index_files and (options.compression != "none" or is_stdio(path)):
            raise UsageError(path, "--index-files indexes uncompressed files: offsets into "
                                   f"{'stdout' if is_stdio(path) else 'a compressed stream'}"
                                   " mean nothing to DALI or the tfrecord package",
                             "drop --compression, or --index-files")
        self.path = str(path)
        self.index_paths = {}  # shard path -> its index's staged path (local writes)
        from ...codecs.example import PRESETS, own_keys
        from ...codecs.images import grayscale_shape
        self.options = o = options
        schema = PRESETS[o.preset]
        self.image_format = o.image_format or schema.image_format
        # TFDS names even a single shard -00000-of-00001; asked for explicitly, so is it.
        suffix_one = o.preset == "tfds" and o.shards is not None
        shards = check_shard_count(1 if o.shards is None else o.shards)
        path = str(path)
        if not dataset.splits:
            raise NoSplits(path, "nothing to write: the input has no splits")
        if is_stdio(path):
            if len(dataset.splits) > 1:
                raise UsageError(path, f"TFRecord on stdout is one split; the input has "
                                       f"{len(dataset.splits)} ({', '.join(dataset.splits)})",
                                 "choose one with --split")
            if shards > 1:
                raise UsageError(path, "TFRecord on stdout is one stream, not --shards "
                                       f"{shards}", "write to a file name to get shards")
        self.plan = []  # (split, settings, shard set)
        self.by_split = {}  # the dataset's name of a split -> its entry in plan
        self.targets, self.stale = [], []
        for name, split in dataset.splits.items():
            # RGB only reaches here as PNG (the SPEC's holds_when, at the door).
            shape = grayscale_shape(split, None, "TFRecord", colour=True)
            where = split.header.source or split.name
            # Labels are checked before the class count is taken from them (max + 1 of
            # NaN or 2**64 - 1 would fail or build a template per class).
            _check_labels(split.labels(), where)
            num_classes = split.num_classes()
            check_num_classes(num_classes, where, "labels")
            extra = extras.checked(split, own_keys(schema))
            original = np.asarray(split.indices(), np.int64) \
                if extra is not None and o.with_index else None
            settings = Settings(schema, self.image_format, o.label_format or
                                schema.label_format, int(o.jpeg_quality), num_classes,
                                shape, bool(o.with_index), bool(o.exact_jpeg_error),
                                split.header.class_names, extra, original)
            base = split_target(path, name, len(dataset.splits) > 1)
            shard_set = ShardSet(base, split.header.count, shards, suffix_one,
                                 stream=is_stdio(base))
            self.plan.append((split, settings, shard_set))
            self.by_split[name] = self.plan[-1]
            starts = [0] + shard_set.bounds[:-1]
            self.targets += [ShardTarget(name, i, str(t), a, b) for i, (t, a, b) in
                             enumerate(zip(shard_set.targets, starts, shard_set.bounds))]
            if not shard_set.stream:
                self.stale += other_shard_sets(shard_set.base, shard_set.targets,
                                               (INDEX_SUFFIX,))
                # an index of other records beside a shard
                self.stale += [index_path(t) for t in shard_set.targets if not
                               o.index_files and os.path.lexists(index_path(t))]
        if any(settings.extras is not None for _, settings, _ in self.plan):
            extras.kept(dataset)  # every record holds them as int64 features
        self.record_bytes = max(int(np.prod(s.slot_shape)) for _, s, _ in self.plan)
        self.chunk = budget.piece_rows(self.record_bytes, CHUNK)

    def check_plannable(self):
        """Index files are written beside a local write's shards only."""
        if self.options.index_files:
            raise UsageError(self.path, "--index-files does not apply to planned runs",
                             "write the indexes with a local conversion")

    def outputs(self):
        """The shards, each with its index file when written locally with index_files."""
        return [p for t in self.targets for p in [t.path] + (
            [index_path(t.path)] if self.options.index_files else [])]

    def shared(self, records) -> ParallelEncoder:
        """The encoder of every split's settings (warmed first: forked workers inherit
        them)."""
        for _, settings, _ in self.plan:
            settings.warm()
        return ParallelEncoder([s for _, s, _ in self.plan],
                               check_workers(self.options.workers), self.options.processes,
                               self.record_bytes, self.chunk, total=records)

    def stage(self, staged, target):
        """The shard's staged path; with index_files, its index's too."""
        if self.options.index_files:
            self.index_paths[target.path] = staged.file(index_path(target.path))
        return super().stage(staged, target)

    def write_targets(self, targets, paths):
        """Shards of one split at paths: the split in one pass cut at their ends when
        they are all of it, else one shard's range."""
        split, settings, shard_set = self.by_split[targets[0].split]
        positions = settings.extras is not None
        if len(targets) == len(shard_set.targets):  # the split in one pass
            pieces = _chunks(split, shard_set.bounds, self.chunk, positions)
        elif split.can_seek:  # read the shard's range only
            [t] = targets
            pieces = _range_pieces(split, t.start, t.stop, self.chunk, positions)
        else:  # a stream: read up to the shard, cut as the set is cut
            pieces = ((0, *rest) for out, *rest in _chunks(
                split, shard_set.bounds, self.chunk, positions) if out == targets[0].index)
        outputs = [_Output(t.path, paths[t.index], self.options.compression,
                           self.index_paths.get(t.path)) for t in targets]
        counters = [TFRecordCounters() for _ in targets]
        pixels = int(np.prod(settings.shape))
        with self.session(sum(t.stop - t.start for t in targets)) as encoder:
            for out, n, data, (esum, emax, ecount) in encoder.encode(settings, pieces):
                outputs[out].write(data)
                counters[out].merge(TFRecordCounters(n, esum, emax, ecount, ecount * pixels))
                self.advance(n)
        done = {}
        for t, output, c in zip(targets, outputs, counters):
            files = output.close()
            done[t.path] = (files if len(files) > 1 else files[0]), c
        return done

    def stats(self, counters):
        """write()'s stats: records, the class names (each record holds its own as
        label_name) and, for JPEG, its error over the records measured."""
        stats: dict = {"records": counters.records}
        names = next((s.class_names for _, s, _ in self.plan if s.class_names), ())
        if names:
            stats["class_names"] = list(names)
        if self.image_format == "jpeg":
            stats["jpeg_mean_abs_error"] = round(counters.error_sum / counters.pixels, 4) \
                if counters.pixels else 0.0
            stats["jpeg_max_abs_error"] = counters.error_max
            stats["jpeg_error_records"] = counters.measured
        return stats


def prepare_write(dataset, path, options) -> TFRecordWrite:
    """The sharded write of dataset to path with options (SPEC.options())."""
    return TFRecordWrite(dataset, path, options)
