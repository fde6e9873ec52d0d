"""Writing Hugging Face Parquet (layout in format.py): each split to a shard set
`<folder>/<split>-00000-of-0000N.parquet`, its images PNG-encoded on one or more
workers (mnistconv.parallel), row groups of a fixed number of rows, and a README.md
card; all staged and committed together (fileio.StagedOutput).

Work is cut into pieces of consecutive rows that never cross a row group or a shard,
and each row group is handed to pyarrow as one contiguous batch, so the bytes depend
only on the data and the options: the same on every run and for any number of workers.
"""

import os
import re
from dataclasses import dataclass

import numpy as np

from ...errors import CannotWrite, CorruptData, NoSplits, UsageError
from ...fileio import StagedOutput, open_staged, output_entries, sha256_file
from ...limits import check_num_classes, check_option_name, safe_split_name
from ...parallel import COUNTERS, ParallelEncoder, check_workers
from ...contract import Counters, ShardTarget, ShardedWrite
from ...records import NO_PROGRESS, OutputFile, Split, WriteResult
from ...shards import check_shard_count
from ...codecs.classes import check_labels
from .. import extras
from ...codecs import png
from . import card
from .reader import pyarrow

# Rows per work piece (at most; a row group may hold several): a worker's shared slot
# and the parent's pending pieces stay small.
PIECE = 1024
DEFAULT_ROW_GROUP = 1000


class _PngTask:
    """Encodes pieces of one image shape (the task ParallelEncoder runs: plain
    attributes, inherited by forked workers). A piece's bytes are its n + 1 int32
    offsets followed by the PNGs."""

    def __init__(self, shape):
        self.slot_shape = tuple(shape)

    def fill(self, out, images):
        out[...] = images.reshape(out.shape)

    def encode(self, images, labels, indices):
        data, offsets = png.encode_batch(np.asarray(images).reshape(
            (len(labels),) + self.slot_shape))
        return offsets.tobytes() + data, (0,) * COUNTERS


def _class_names(dataset, labels):
    """Names a reader provided (the first split that has them, if they cover every
    label), else '0'..str(n - 1) for the splits' class count (10 at least)."""
    needed = max((int(lab.max()) + 1 for lab in labels.values() if len(lab)), default=0)
    for split in dataset.splits.values():
        names = getattr(split.header, "class_names", None) or \
            getattr(split, "class_names", None)
        if names and len(names) >= needed:
            return [str(n) for n in names]
    num_classes = max(split.num_classes() for split in dataset.splits.values())
    check_num_classes(num_classes, next(iter(dataset.splits.values())).header.source)
    return [str(i) for i in range(num_classes)]


def _check_split(split):
    """The split's labels (int64) once its images are known to be PNG-able."""
    h = split.header
    where = h.source or split.name
    if np.dtype(h.dtype) != np.uint8:
        raise UsageError(where, f"Parquet images are 8-bit PNGs; these pixels are "
                                f"{np.dtype(h.dtype).name}",
                         "convert them to uint8 first")
    try:
        png.colour_type(h.shape)
    except ValueError as e:
        raise CannotWrite(where, f"Parquet images are PNGs: {e}") from None
    labels = split.labels()
    if labels.dtype.kind not in "iub":
        raise CannotWrite(where, f"labels are {labels.dtype.name}, Parquet's are class "
                                 "numbers (int64)")
    check_labels(labels, where)
    if len(labels) and labels.min() < -1:
        raise UsageError(where, f"label {int(labels.min())} is no class", "a ClassLabel "
                                "is 0 or more (-1 for none)")
    return labels.astype(np.int64)


def _cuts(count, shards, row_group):
    """[(shard, end of piece, ends a row group)] for a split of `count` rows."""
    cuts = []
    bounds = [count * (i + 1) // shards for i in range(shards)]
    start = 0
    for shard, end in enumerate(bounds):
        for group in range(start, end, row_group):
            group_end = min(group + row_group, end)
            for piece in range(group, group_end, PIECE):
                piece_end = min(piece + PIECE, group_end)
                cuts.append((shard, piece_end, piece_end == group_end))
        start = end
    return cuts


def _pieces(split, labels, cuts, progress, table=None):
    """(key, images, labels, indices) for each cut, re-cut from the split's batches
    (a piece spanning two batches is copied; the others are views). The key is (shard,
    ends a row group, labels, the extra fields' rows from `table` or None)."""
    from ...records import iter_batches
    where = split.header.source or split.name
    batches = iter_batches(split, progress, f"{split.name} -> parquet")
    held, at = None, 0  # images not yet handed out, from row `at`
    for shard, end, closes in cuts:
        want = end - at
        while held is None or len(held) < want:
            batch = next(batches, None)
            if batch is None:
                raise CorruptData(where, f"yielded {at + (len(held) if held is not None else 0)}"
                                         f" examples, its header says {split.header.count}")
            held = batch.images if held is None or not len(held) else \
                np.concatenate([held, batch.images])
        piece, held = held[:want], held[want:]
        yield (shard, closes, labels[at:end], None if table is None else table[at:end]), \
            piece, labels[at:end], np.arange(at, end, dtype=np.int64)
        at = end
    extra = (len(held) if held is not None else 0) + sum(len(b) for b in batches)
    if extra:
        raise CorruptData(where, f"yielded {at + extra} examples, its header says "
                                 f"{split.header.count}")


def _existing_shards(folder, split, keep):
    """Parquet files of an earlier write of this split (other shard counts), to be
    superseded: `<split>-NNNNN-of-NNNNN.parquet` and `<split>.parquet`."""
    pattern = re.compile(re.escape(split) + r"(-\d{5}-of-\d{5})?\.parquet")
    return [os.path.join(folder, n) for n in output_entries(folder)
            if pattern.fullmatch(n) and n not in keep]


def checked_setup(dataset, path, config, shards, row_group_size):
    """write()'s checks of its arguments and what every shard shares, for write() and
    the sharded write (ParquetWrite): (labels per split, class names, Arrow schema,
    one_file, folder, shards, row_group_size, extra fields table (or None) per split).
    Extra fields (QMNIST's columns) are int32 columns after label, the same in every
    split (one schema, one features list)."""
    pa, _ = pyarrow("writing Parquet")
    path = str(path)
    if not dataset.splits:
        raise NoSplits(path, "nothing to write: the input has no splits")
    one_file = path.lower().endswith(".parquet")
    if config is not None:
        check_option_name(config, "--config")
        if one_file:
            raise UsageError(path, "--config names a folder of a Parquet directory; this "
                                   "output is one file", "name a directory instead")
    shards = check_shard_count(1 if shards is None else shards)
    row_group_size = int(DEFAULT_ROW_GROUP if row_group_size is None else row_group_size)
    if one_file and (len(dataset.splits) > 1 or shards > 1):
        raise UsageError(path, f"one .parquet file holds one split, this input has "
                               f"{len(dataset.splits)} and --shards {shards}",
                         "choose one with --split, or name a directory for the Hub's "
                         "layout")
    labels = {}
    for name, split in dataset.splits.items():
        safe_split_name(name, split.header.source or path)
        labels[name] = _check_split(split)
    names = _class_names(dataset, labels)
    found = {name: extras.checked(split, ("image", "label"))
             for name, split in dataset.splits.items()}
    extra_names = extras.same_names(found, path)
    schema = pa.schema([("image", pa.struct([("bytes", pa.binary()),
                                             ("path", pa.string())])),
                        ("label", pa.int64())] + [(n, pa.int32()) for n in extra_names],
                       metadata={"huggingface": card.features_json(names, extra_names)})
    tables = {name: e[1] if e else None for name, e in found.items()}
    return labels, names, schema, one_file, config or "data", shards, row_group_size, \
        tables


def write(dataset, path, *, force=False, progress=NO_PROGRESS, **options):
    """Write every split as Hugging Face Parquet. A directory gets the Hub's layout:
    `<folder>/<split>-00000-of-0000N.parquet` (folder `data`, config 'default', unless
    `config` names one) and README.md, the dataset card; a name ending in .parquet gets
    the one split of the dataset as that file. shards: files per split; row_group_size:
    rows per row group; workers: PNG encoders (threads, or forked processes if
    processes=True). Returns a WriteResult (files, counts per split).

        write(mnistconv.read("data/mnist"), "mnist-hf/", config="mnist")
    """
    from . import SPEC
    job = ParquetWrite(dataset, path, SPEC.options(options))
    if any(t is not None for t in job.tables.values()):
        extras.kept(dataset)
    tasks = {tuple(s.header.shape): _PngTask(s.header.shape)
             for s in dataset.splits.values()}
    record_bytes = max(int(np.prod(shape)) for shape in tasks)

    files, counts, card_splits = [], {}, []
    with StagedOutput(force, root=job.path) as staged:
        tmps = [staged.file(t.path) for t in job.targets]
        for stale in job.stale:
            staged.supersede(stale)
        if not job.one_file:
            card_tmp = staged.file(os.path.join(job.path, "README.md"))
        with ParallelEncoder(list(tasks.values()), check_workers(job.options.workers),
                             job.options.processes, record_bytes, PIECE,
                             total=sum(s.header.count for s in dataset.splits.values())) \
                as encoder:
            for name, split in dataset.splits.items():
                mine = [(t.path, tmp) for t, tmp in zip(job.targets, tmps) if t.split == name]
                arrow_bytes = _write_split(job, encoder, tasks[tuple(split.header.shape)],
                                           name, [tmp for _, tmp in mine], progress)
                sizes = []
                for target, tmp in mine:
                    size = os.path.getsize(tmp)
                    sizes.append(size)
                    files.append(OutputFile(target, size, sha256_file(tmp)))
                counts[name] = split.header.count
                card_splits.append((name, split.header.count, arrow_bytes, sum(sizes)))
        if not job.one_file:
            text = card.dataset_card(job.options.config or "default", job.folder,
                                     job.names, card_splits, job.schema.names[2:])
            with open_staged(card_tmp) as f:
                f.write(text.encode("utf-8"))
            files.append(OutputFile(os.path.join(job.path, "README.md"),
                                    os.path.getsize(card_tmp), sha256_file(card_tmp)))
    return WriteResult(files, counts, {"row_groups": sum(-(-c // job.row_group)
                                                         for c in counts.values())})


def _write_split(job, encoder, task, name, tmps, progress):
    """Write split `name`'s shard files (job: the ParquetWrite); returns its Arrow size
    (num_bytes in the card)."""
    pa, pq, schema, shards = job.pa, job.pq, job.schema, job.shards
    split = job.dataset.splits[name]
    labels, table = job.labels[name], job.tables[name]
    cuts = _cuts(split.header.count, shards, job.row_group)
    arrow_bytes = 0
    writers = {}
    group = []  # (offsets, data, labels, extra fields) of the row group being gathered
    try:
        pieces = _pieces(split, labels, cuts, progress, table)
        for (shard, closes, piece_labels, piece_extras), n, data, _ in \
                encoder.encode(task, pieces):
            data = bytes(data)  # may be a view of a worker's slot, reused next
            offsets = np.frombuffer(data, np.int32, n + 1)
            group.append((offsets, data[4 * (n + 1):], piece_labels, piece_extras))
            if not closes:
                continue
            table = _row_group(pa, group, schema)
            group = []
            writer = writers.get(shard)
            if writer is None:
                writer = writers[shard] = _open(pq, tmps[shard], schema)
            writer.write_table(table, row_group_size=table.num_rows)
            arrow_bytes += table.nbytes
        for shard in range(shards):  # empty shards (fewer rows than shards) still exist
            if shard not in writers:
                writers[shard] = _open(pq, tmps[shard], schema)
    finally:
        for writer in writers.values():
            writer.close()
            writer.file.close()
    return arrow_bytes


class _Writer:
    def __init__(self, pq, file, schema):
        self.file = file
        extra = schema.names[2:]  # int32 extra fields: as labels (pyarrow's defaults)
        self.parquet = pq.ParquetWriter(
            file, schema,
            # As datasets writes an image dataset (arrow_writer.get_parquet_column_options):
            # PNG bytes neither compress nor repeat, labels do.
            compression={"image.bytes": "none", "image.path": "none", "label": "snappy",
                         **{name: "snappy" for name in extra}},
            use_dictionary=["label", *extra],
            column_encoding={"image.bytes": "PLAIN", "image.path": "PLAIN"},
            write_page_index=True)

    def write_table(self, table, row_group_size):
        self.parquet.write_table(table, row_group_size=row_group_size)

    def close(self):
        self.parquet.close()


def _open(pq, tmp, schema):
    return _Writer(pq, open_staged(tmp), schema)


def _row_group(pa, group, schema):
    """One row group as an Arrow table: contiguous buffers, whatever the pieces."""
    n = sum(len(offsets) - 1 for offsets, *_ in group)
    offsets = np.zeros(n + 1, np.int64)
    at, base = 0, 0
    for piece_offsets, data, *_ in group:
        k = len(piece_offsets) - 1
        offsets[at + 1:at + k + 1] = piece_offsets[1:].astype(np.int64) + base
        at += k
        base += len(data)
    if base >= 1 << 31:
        raise UsageError(None, "a row group over 2 GiB of PNGs", "lower --row-group-size")
    data = b"".join(d for _, d, *_ in group)
    images = pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(
        offsets.astype(np.int32)), pa.py_buffer(data)])
    paths = pa.nulls(n, pa.string())
    image = pa.StructArray.from_arrays([images, paths], fields=list(schema.field("image").type))
    # from_buffers, not pa.array: pa.array imports pandas when it is installed (to check
    # for its types): memory for nothing.
    labels = np.ascontiguousarray(np.concatenate([g[2] for g in group]), np.int64)
    label = pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(labels)])
    columns = [image, label]
    if len(schema.names) > 2:  # the extra fields, int32 columns
        table = np.concatenate([g[3] for g in group]).astype("<i4", copy=False)
        columns += [pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(
            np.ascontiguousarray(table[:, j]))]) for j in range(table.shape[1])]
    return pa.Table.from_arrays(columns, schema=schema)


@dataclass
class ParquetCounters(Counters):
    """A shard's rows, Arrow bytes, and the row groups write() counts for it."""

    rows: int = 0
    arrow_bytes: int = 0
    row_groups: int = 0


class ParquetWrite(ShardedWrite):
    """A Parquet shard set written shard by shard (mnistconv.contract), with the bytes
    write() gives each shard: row groups restart at every shard start (_cuts), so a
    shard's bytes depend on its rows and the options only. finish() writes the README.md
    card (each split's Arrow bytes and sizes summed from the shards' counters) and
    croissant.json."""

    counters = ParquetCounters

    def __init__(self, dataset, path, options):
        self.pa, self.pq = pyarrow("writing Parquet")
        self.dataset, self.path, self.options = dataset, str(path), options
        self.labels, self.names, self.schema, self.one_file, self.folder, self.shards, \
            self.row_group, self.tables = checked_setup(dataset, path, options.config,
                                                        options.shards,
                                                        options.row_group_size)
        self.targets, self.stale = [], []
        for name, split in dataset.splits.items():
            count = split.header.count
            bounds = [count * (i + 1) // self.shards for i in range(self.shards)]
            for index, stop in enumerate(bounds):
                self.targets.append(ShardTarget(name, index, self._target(name, index),
                                                bounds[index - 1] if index else 0, stop))
            if not self.one_file:
                keep = {os.path.basename(t.path) for t in self.targets if t.split == name}
                self.stale += _existing_shards(os.path.join(self.path, self.folder), name,
                                               keep)

    def _target(self, split_name, index):
        if self.one_file:
            return self.path
        return os.path.join(self.path, self.folder,
                            f"{split_name}-{index:05d}-of-{self.shards:05d}.parquet")

    def write_shard(self, index, staged_path):
        """Shard `index` at staged_path: (OutputFile, ParquetCounters)."""
        target = self.targets[index]
        split = self.dataset.splits[target.split]
        labels, extra = self.labels[target.split], self.tables[target.split]
        cuts = _cuts(split.header.count, self.shards, self.row_group)
        if type(split).take is not Split.take:  # seekable: read the shard's rows only
            mine = [c for c in cuts if c[0] == target.index]
            ends = [end for _, end, _ in cuts]
            first = cuts.index(mine[0]) if mine else 0
            starts = [ends[first - 1] if first else 0] + [end for _, end, _ in mine[:-1]]
            source = (((shard, closes, labels[at:end],
                        None if extra is None else extra[at:end]),
                       split.take(np.arange(at, end, dtype=np.int64)), labels[at:end],
                       np.arange(at, end, dtype=np.int64))
                      for (shard, end, closes), at in zip(mine, starts))
        else:  # a stream: the writer's own pieces, up to this shard
            source = (p for p in _pieces(split, labels, cuts, NO_PROGRESS, extra)
                      if p[0][0] == target.index)
        task = _PngTask(split.header.shape)
        counters, group = ParquetCounters(), []
        parquet = _open(self.pq, staged_path, self.schema)
        try:
            with ParallelEncoder([task], check_workers(self.options.workers),
                                 self.options.processes, int(np.prod(split.header.shape)),
                                 PIECE) as encoder:
                for (_, closes, piece_labels, piece_extras), n, data, _ in \
                        encoder.encode(task, source):
                    data = bytes(data)
                    offsets = np.frombuffer(data, np.int32, n + 1)
                    group.append((offsets, data[4 * (n + 1):], piece_labels, piece_extras))
                    counters.rows += n
                    if closes:
                        table = _row_group(self.pa, group, self.schema)
                        group = []
                        parquet.write_table(table, row_group_size=table.num_rows)
                        counters.arrow_bytes += table.nbytes
        finally:
            parquet.close()
            parquet.file.close()
        # write() counts ceil(rows / row group size) per split: shard 0 counts it.
        if target.index == 0:
            counters.row_groups = -(-split.header.count // self.row_group)
        return (OutputFile(target.path, os.path.getsize(staged_path),
                           sha256_file(staged_path)), counters)

    def stats(self, counters):
        """write()'s stats: the row groups."""
        return {"row_groups": counters.row_groups}

    def metadata_targets(self):
        """The card, README.md, and croissant.json, unless the output is one file."""
        from ...croissant import target
        return [] if self.one_file else [os.path.join(self.path, "README.md"),
                                         target(self.path)]

    def finish(self, recorded):
        """Write README.md from the recorded shards' counters, and croissant.json from
        their sizes and hashes, as a local write does."""
        from ... import croissant
        if self.one_file:
            return
        card_splits = []
        for name, split in self.dataset.splits.items():
            mine = [recorded[t.path] for t in self.targets if t.split == name]
            card_splits.append((name, split.header.count,
                                sum(c.arrow_bytes for _, c in mine),
                                sum(f.bytes for f, _ in mine)))
        text = card.dataset_card(self.options.config or "default", self.folder,
                                 self.names, card_splits, self.schema.names[2:])
        with StagedOutput(force=True) as staged:
            with open_staged(staged.file(os.path.join(self.path, "README.md"))) as f:
                f.write(text.encode("utf-8"))
        croissant.write(self.dataset, self.path,
                        WriteResult([f for f, _ in recorded.values()], {}), "parquet",
                        force=True)


def prepare_write(dataset, path, options) -> ParquetWrite:
    """The sharded write of dataset to path with options (SPEC.options())."""
    return ParquetWrite(dataset, path, options)
