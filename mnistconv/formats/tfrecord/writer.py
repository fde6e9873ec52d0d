"""Writing TFRecord: each split to one file or a shard set (mnistconv.shards), its records
encoded on one or more workers (mnistconv.parallel), appended in order, compressed and
hashed as they go, and committed with the whole output (fileio.StagedOutput).

Work is cut into chunks of consecutive records that never cross a shard; a chunk's
bytes depend only on its records, so the output is the same for any number of workers,
on every run and machine.
"""

import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from ... import codecs
from .. import extras
from ...errors import FormatError, NoSplits, UsageError
from ...fileio import (DeflateWriter, HashingWriter, StagedOutput, is_stdio, open_staged,
                       output_file_info)
from ...limits import check_num_classes
from ...parallel import ParallelEncoder, check_workers
from ... import budget
from ...records import NO_PROGRESS, OutputFile, Split, WriteResult
from ...shards import ShardSet, check_shard_count, other_shard_sets
from ...contract import Counters, ShardTarget, ShardedWrite
from . import SPEC
from ...codecs.framing import Framer
from .index_files import IndexWriter, index_path
from .names import split_target

# Records per work unit: big enough that per-chunk costs (a JPEG tile, a round trip to a
# worker) stay small, small enough that memory stays flat and the workers finish
# together (the last chunk runs alone).
CHUNK = 1000
# Without exact_jpeg_error, the JPEG error is measured on 1 record in ERROR_SAMPLE (the
# first 63 of every chunk of 1000). Decoding is a large share of the encoding work: a
# quarter left idx-to-tfrecord slower than the one-core C reference (issue 13 asks
# for no longer); a sixteenth does not (benchmarks/README.md).
# On MNIST's training set a sixteenth gives mean 1.0556 and max 26, a quarter 1.0607
# and 26, every record 1.0622 and 27.
ERROR_SAMPLE = 16


@dataclass(eq=False)  # tasks are told apart by identity (ParallelEncoder)
class Settings:
    """How one split's records are encoded: the task ParallelEncoder runs (plain
    attributes, inherited by forked workers, usable from any thread)."""

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
    # (names, N x k int32 table) of the split's extra fields, or None. With them the
    # pieces' indices are the records' positions in the split, which pick their
    # rows here and, with_index, their original indices from `original`: the
    # table travels to forked workers with the task (inherited), not per piece.
    extras: Any = None
    original: Any = None

    def __post_init__(self):
        self.class_names = tuple(self.class_names)
        self.extra_names = self.extras[0] if self.extras is not None else ()
        # One image as encode_records() takes it: for JPEG, padded to whole 8x8
        # blocks, which fill() does while it copies the pixels anyway.
        self.slot_shape = codecs.block_padded_shape(*self.shape) \
            if self.image_format == "jpeg" else tuple(self.shape)

    def key(self):
        """What the Example templates depend on."""
        return (self.schema.name, self.image_format, self.label_format, self.quality,
                self.num_classes, self.shape, self.with_index, self.class_names,
                self.extra_names)

    def encode(self, images, labels, indices):
        """Framed records of a chunk and its JPEG error counters (ParallelEncoder)."""
        return encode_records(self, images, labels, indices)

    def fill(self, out, images):
        """Copy a chunk's images (n x H x W, or n x H x W x 1) into out (n x slot_shape),
        padding them to JPEG blocks when slot_shape is padded."""
        images = np.asarray(images).reshape((len(images),) + tuple(self.shape))
        if out.shape[1:] != images.shape[1:]:
            codecs.pad_to_blocks(images, out=out)
        else:
            out[:] = images

    def warm(self):
        """Import the codecs and protobuf and build the Example templates now: forked
        workers inherit them instead of each paying for them."""
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
        # Decoding is costly (see ERROR_SAMPLE): unless asked for every record, the
        # error is measured on the first sixteenth of each chunk.
        measured = n if settings.exact_error else -(-n // ERROR_SAMPLE)
        prefix, blobs, err_sum, err_max = codecs.encode_jpeg_measured(
            images, settings.quality, settings.shape, measured)
        suffix = codecs.EOI
    else:
        images = np.ascontiguousarray(images).reshape((n,) + settings.shape)
        if settings.image_format == "png":
            # The bytes tf.image.encode_png writes (TFDS' own), encoded a batch at a
            # time, without Pillow's per-image set-up.
            from ...codecs import tfpng as png
            prefix, blobs, suffix = png.png_parts(images)
        else:
            blobs = [im.tobytes() for im in images]
    builder, framer = _builder(settings)
    labels = np.asarray(labels)
    if settings.with_index or settings.extras is not None:
        # An index or extra fields differ per record: each record is serialized whole.
        # With extras the pieces' indices are positions in the split (see Settings).
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

    def __init__(self, target, staged_path, compression, index=False):
        self.target = target
        self.index = IndexWriter() if index else None
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

    def close(self) -> OutputFile:
        """Finish the file; its path (the target's name), size and SHA-256."""
        if self.sink is not self.hashing:
            self.sink.close()
        self.file.close()
        return OutputFile(str(self.target), self.hashing.bytes, self.hashing.sha256())

    def close_index(self, staged) -> OutputFile:
        """Write the file's index (index_files.py) at its staged place."""
        target = index_path(self.target)
        tmp = staged.file(target)
        self.index.save(tmp)
        info = output_file_info(tmp)
        return OutputFile(target, info.bytes, info.sha256)


def _stale_indexes(shard_set, staged, index_files):
    """Index files an earlier write left beside the targets: replaced when indexes are
    written, removed when not (an index of other records would be refused on reading)."""
    import os
    for target in shard_set.targets:
        if not index_files and os.path.lexists(index_path(target)):
            staged.supersede(index_path(target))


def _check_split(split):
    from ...codecs.images import grayscale_shape
    return grayscale_shape(split, None, "TFRecord")


def _chunk_records(image_bytes):
    """Records per chunk: CHUNK, fewer for large images (the chunks in flight, and the
    workers' shared slots, stay within the memory budget: budget.piece_rows)."""
    return budget.piece_rows(image_bytes, CHUNK)


def _chunks(split, bounds, chunk, positions=False):
    """(output number, images, labels, indices) pieces of at most `chunk` records that
    never cross an output boundary (bounds: the end position of each output); with
    positions, the records' positions in the split stand for their indices."""
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


def _check_labels(labels, where):
    """A split's labels checked before anything is written: integers from 0, and few
    enough classes (a one-hot label is a row of max label + 1 values). Nothing is
    copied: an int64 copy of millions of labels shows in a conversion's peak."""
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


def _split_sets(dataset, path, o):
    """(split, Settings, ShardSet) for every split of options o (SPEC.options()),
    checked before any output exists, with the image format chosen: what write() and
    a sharded write both start from, so a shard written alone is cut and encoded as in
    the whole set."""
    from ...codecs.example import PRESETS
    schema = PRESETS[o.preset]
    image_format = o.image_format or schema.image_format
    label_format = o.label_format or schema.label_format
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

    several = len(dataset.splits) > 1
    plan = []  # (split, settings, shard set)
    for name, split in dataset.splits.items():
        shape = _check_split(split)
        where = split.header.source or split.name
        # Labels are checked before the class count is taken from them (max + 1 of
        # NaN or 2**64 - 1 would fail or build a template per class) and before any
        # output exists.
        _check_labels(split.labels(), where)
        num_classes = split.num_classes()
        check_num_classes(num_classes, where, "labels")
        from ...codecs.example import own_keys
        extra = extras.checked(split, own_keys(schema))
        original = np.asarray(split.indices(), np.int64) \
            if extra is not None and o.with_index else None
        settings = Settings(schema, image_format, label_format, int(o.jpeg_quality),
                            num_classes, shape, bool(o.with_index), bool(o.exact_jpeg_error),
                            split.header.class_names, extra, original)
        base = split_target(path, name, several)
        plan.append((split, settings, ShardSet(base, split.header.count, shards,
                                               suffix_one, stream=is_stdio(base))))

    if any(settings.extras is not None for _, settings, _ in plan):
        extras.kept(dataset)  # every record holds them as int64 features
    return plan, image_format


def write(dataset, path, *, force=False, progress=NO_PROGRESS, **options) -> WriteResult:
    """Write every split as TFRecord: one split to `path`, several to
    `<stem>-<split><ext>` beside it; shards=N cuts each into TensorFlow-named shards.
    Returns a WriteResult: the files, the records per split, and stats: "records" and,
    for JPEG, "jpeg_mean_abs_error" and "jpeg_max_abs_error" over the pixels of the
    records measured, and "jpeg_error_records", their number: the first sixteenth of
    every chunk of CHUNK records (chunks start at every split and shard), or every
    record with exact_jpeg_error=True. index_files=True writes `<file>.idx` beside every
    output file (index_files.py: DALI's and the `tfrecord` package's record index).

    workers: 1 (the default) encodes in the calling thread; N > 1 on N threads; None
    one per core. processes=True lets the workers be forked processes (faster; the
    command line asks for it): see mnistconv.parallel for exactly when.

        ds = mnistconv.read("data/mnist")
        result = write(ds, "out/mnist.tfrecord", shards=4, workers=2)
        result.counts   # {'train': 60000, 'test': 10000}
    """
    o = SPEC.options(options)
    plan, image_format = _split_sets(dataset, path, o)
    compression, index_files = o.compression, o.index_files
    workers = check_workers(o.workers)
    if index_files and (compression != "none" or is_stdio(path)):
        raise UsageError(path, "--index-files indexes uncompressed files: offsets into "
                               f"{'stdout' if is_stdio(path) else 'a compressed stream'} "
                               "mean nothing to DALI or the tfrecord package",
                         "drop --compression, or --index-files")
    all_settings = [settings for _, settings, _ in plan]
    with StagedOutput(force, root=path) as staged:
        files, counts, totals = _write_splits(plan, staged, workers, o, progress)
    result_stats = _stats(image_format, totals)
    names = next((s.class_names for s in all_settings if s.class_names), ())
    if names:  # said in the summary; each record holds its own as label_name
        result_stats = {"records": totals.records, "class_names": list(names),
                        **result_stats}
    return WriteResult(files, counts, result_stats)


def _stats(image_format, totals) -> dict:
    """write()'s stats from the counters: records and, for JPEG, its error over the
    records measured."""
    stats: dict = {"records": totals.records}
    if image_format == "jpeg":
        stats["jpeg_mean_abs_error"] = round(totals.error_sum / totals.pixels, 4) \
            if totals.pixels else 0.0
        stats["jpeg_max_abs_error"] = totals.error_max
        stats["jpeg_error_records"] = totals.measured
    return stats


def _write_splits(plan, staged, workers, o, progress):
    """write()'s work inside its staged output, with options o: every split encoded and
    written; (the files, records per split, TFRecordCounters)."""
    files, counts, totals = [], {}, TFRecordCounters()
    index_files = bool(o.index_files)
    all_settings = [settings for _, settings, _ in plan]
    record_bytes = max(int(np.prod(s.slot_shape)) for s in all_settings)
    chunk = _chunk_records(record_bytes)
    staged_paths = [shard_set.stage_files(staged) for _, _, shard_set in plan]
    for _, _, shard_set in plan:
        shard_set.supersede_others(staged)
        _stale_indexes(shard_set, staged, index_files)
    for settings in all_settings:
        settings.warm()
    with ParallelEncoder(all_settings, workers, o.processes, record_bytes, chunk,
                         total=sum(s.header.count for s, _, _ in plan)) as encoder:
        for (split, settings, shard_set), paths in zip(plan, staged_paths):
            outputs = [_Output(t, p, o.compression, index_files)
                       for t, p in zip(shard_set.targets, paths)]
            progress.start(f"{split.name} -> tfrecord", split.header.count)
            counts[split.name] = 0
            try:
                pieces = _chunks(split, shard_set.bounds, chunk, settings.extras is not None)
                for out, n, data, (esum, emax, ecount) in encoder.encode(settings,
                                                                         pieces):
                    outputs[out].write(data)
                    counts[split.name] += n
                    totals.merge(TFRecordCounters(n, esum, emax, ecount,
                                                  ecount * int(np.prod(settings.shape))))
                    progress.advance(n)
            finally:
                progress.finish()
            for output in outputs:
                files.append(output.close())
                if index_files:
                    files.append(output.close_index(staged))
    return files, counts, totals


@dataclass
class TFRecordCounters(Counters):
    """A shard's records, and its JPEG error: sum, max, records and pixels measured."""

    MAXED = ("error_max",)
    records: int = 0
    error_sum: int = 0
    error_max: int = 0
    measured: int = 0
    pixels: int = 0


class TFRecordWrite(ShardedWrite):
    """A TFRecord shard set written shard by shard (mnistconv.contract): each shard the
    bytes write() gives it with the same options, since the settings, cut and chunks
    are write()'s own (chunks restart at every shard start and at every multiple of the
    chunk size, so the JPEG error sample is the same too). Plain TFRecord has nothing
    to finish: the shards are the output."""

    counters = TFRecordCounters

    def __init__(self, dataset, path, options):
        if options.index_files:
            raise UsageError(str(path), "--index-files does not apply to planned runs",
                             "write the indexes with a local conversion")
        self.options = options
        self.plan, self.image_format = _split_sets(dataset, path, options)
        self.targets, self.stale = [], []
        for split, _, shard_set in self.plan:
            start = 0
            for index, (target, stop) in enumerate(zip(shard_set.targets,
                                                       shard_set.bounds)):
                self.targets.append(ShardTarget(split.name, index, str(target), start,
                                                stop))
                start = stop
            self.stale += other_shard_sets(shard_set.base, shard_set.targets)

    def write_shard(self, index, staged_path):
        """Shard `index` of the set at staged_path: (OutputFile, TFRecordCounters)."""
        target = self.targets[index]
        split, settings, _ = next(e for e in self.plan if e[0].name == target.split)
        start, stop = target.start, target.stop
        chunk = _chunk_records(max(int(np.prod(s.slot_shape)) for _, s, _ in self.plan))
        settings.warm()
        if type(split).take is not Split.take:  # seekable: read the shard's range only
            pieces = _range_pieces(split, start, stop, chunk, settings.extras is not None)
        else:  # a stream: read up to the shard, cut exactly as write() does
            bounds = [t.stop for t in self.targets if t.split == target.split]
            pieces = ((0, *rest) for out, *rest in _chunks(
                split, bounds, chunk, settings.extras is not None) if out == target.index)
        counters = TFRecordCounters()
        output = _Output(target.path, staged_path, self.options.compression)
        with ParallelEncoder([settings], check_workers(self.options.workers),
                             self.options.processes, int(np.prod(settings.slot_shape)),
                             chunk, total=stop - start) as encoder:
            for _, n, data, (esum, emax, ecount) in encoder.encode(settings, pieces):
                output.write(data)
                counters.merge(TFRecordCounters(n, esum, emax, ecount,
                                                ecount * int(np.prod(settings.shape))))
        return output.close(), counters

    def stats(self, counters):
        """write()'s stats: records and, for JPEG, its error over the records measured."""
        return _stats(self.image_format, counters)


def prepare_write(dataset, path, options) -> TFRecordWrite:
    """The sharded write of dataset to path with options (SPEC.options()).

        job = prepare_write(ds, "m.tfrecord", SPEC.options({"shards": 4}))
    """
    return TFRecordWrite(dataset, path, options)


def _range_pieces(split, start, stop, chunk, positions=False):
    """write()'s pieces of records start..stop of a seekable split: cut at every
    multiple of chunk (where a reader's batches of chunk records end); with positions,
    as _chunks()."""
    labels = np.asarray(split.labels())
    indices = None if positions else np.asarray(split.indices(), np.int64)
    at = start
    while at < stop:
        end = min(stop, (at // chunk + 1) * chunk)
        here = np.arange(at, end, dtype=np.int64)
        yield (0, split.take(here), labels[at:end],
               here if positions else indices[at:end])
        at = end
