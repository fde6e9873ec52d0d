"""Writing Hugging Face Parquet (layout in __init__.py): each split to a shard set, its
images PNG-encoded on one or more workers (mnistconv.workers.parallel), and a README.md card.

Work is cut into pieces of consecutive rows that never cross a row group or a shard,
and each row group is handed to pyarrow as one contiguous batch, so the bytes depend
only on the data and the options: the same on every run and for any number of workers.
"""

import os
import re
from dataclasses import dataclass

import numpy as np

from ...errors import CannotWrite, CorruptData, NoSplits, UsageError
from ...io import budget
from ...io.fileio import open_staged, output_entries, own_file_size, sha256_file
from ...limits import check_num_classes, check_option_name, safe_split_name
from ...workers.parallel import COUNTERS, ParallelEncoder, check_workers
from ..contract import Counters, ShardTarget, ShardedWrite
from ...model.records import OutputFile
from ...io.shards import check_shard_count, shard_bounds
from ...codecs.classes import check_labels
from .. import extras
from ...codecs import png
from . import card
from .reader import ParquetSplit, matches_name, pyarrow, read, sniff  # noqa: F401

# Rows per work piece at most, so a worker's shared slot and pending pieces stay small;
# fewer for large images (budget.piece_rows: a piece's share of the budget in pixels, as
# its scan lines and PNGs each take about as much again).
PIECE = 1024
DEFAULT_ROW_GROUP = 1000
# Large images get fewer rows a group, as datasets sizes its row groups by bytes: a
# group is gathered whole, so at most one piece's share of the budget in pixels, and a
# group is then one piece, handed to pyarrow without joining pieces (1000 224 x 224 RGB
# images a group was one page larger than the reader admits, and 111 were held twice
# over as their pieces and their join: benchmarks/README.md, bench_medmnist224).
ROW_GROUP_PIXEL_BYTES = budget.BATCH_BYTES // budget.PIECES_IN_FLIGHT
# pyarrow cuts a column's pages (data_page_size, 1 MiB) only between write batches of
# write_batch_size values (1024), and holds a page twice (the encoder's buffer, the page)
# until it is written: a write batch of large images holds about a page of pixels, so a
# page of their PNGs is near 1 MiB, not a whole group. 1024 rows (pyarrow's default) for
# images up to 1 KiB: MNIST's bytes stay the same.
WRITE_BATCH = 1024
DATA_PAGE_BYTES = 1 << 20  # pyarrow's data_page_size


def default_row_group(shapes):
    """Rows a group when --row-group-size is not given: DEFAULT_ROW_GROUP, fewer when
    that many of the largest image would pass ROW_GROUP_PIXEL_BYTES of pixels."""
    largest = max((int(np.prod(shape)) for shape in shapes), default=1)
    return max(1, min(DEFAULT_ROW_GROUP, ROW_GROUP_PIXEL_BYTES // max(1, largest)))


class _PngTask:
    """ParallelEncoder's task: a piece's bytes are its n + 1 int32 offsets, then the PNGs."""

    def __init__(self, shape):
        self.slot_shape = tuple(shape)

    def fill(self, out, images):
        out[...] = images.reshape(out.shape)

    def encode(self, images, labels, indices):
        data, offsets = png.encode_batch(np.asarray(images).reshape(
            (len(labels),) + self.slot_shape))
        return offsets.tobytes() + data, (0,) * COUNTERS


def _class_names(dataset, labels):
    """The reader's class names if they cover every label, else '0'..str(n - 1) (10 at least)."""
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
    """The split's labels (int64); its images (8-bit grey or RGB PNGs) passed the door
    (contract.admit, SPEC.holds)."""
    where = split.header.source or split.name
    labels = split.labels()
    if labels.dtype.kind not in "iub":
        raise CannotWrite(where, f"labels are {labels.dtype.name}, Parquet's are class "
                                 "numbers (int64)")
    check_labels(labels, where)
    if len(labels) and labels.min() < -1:
        raise UsageError(where, f"label {int(labels.min())} is no class", "a ClassLabel "
                                "is 0 or more (-1 for none)")
    return labels.astype(np.int64)


def _cuts(targets, row_group, piece=PIECE):
    """[(shard, end of piece, ends a row group)] for a split's shard targets, pieces of
    `piece` rows at most."""
    cuts = []
    for t in targets:
        for group in range(t.start, t.stop, row_group):
            group_end = min(group + row_group, t.stop)
            for start in range(group, group_end, piece):
                piece_end = min(start + piece, group_end)
                cuts.append((t.index, piece_end, piece_end == group_end))
    return cuts


def _pieces(split, labels, cuts, progress, table=None, piece=PIECE):
    """Pieces (key, images, labels, indices) per cut; key: (shard, closes a group, labels, extras)."""
    from ...model.records import iter_batches
    where = split.header.source or split.name
    # Batches of a piece's rows: most pieces are then a batch as read, not a copy joined
    # from two batches, each kept whole by the view of its rest.
    batches = iter_batches(split, progress, f"{split.name} -> parquet", piece)
    held, at = [], 0  # images not yet handed out, from row `at`
    for shard, end, closes in cuts:
        want = end - at
        while len(held) < want:
            batch = next(batches, None)
            if batch is None:
                raise CorruptData(where, f"yielded {at + len(held)} examples, its header "
                                         f"says {split.header.count}")
            held = np.concatenate([held, batch.images]) if len(held) else batch.images
        piece, held = held[:want], held[want:]
        yield (shard, closes, labels[at:end], None if table is None else table[at:end]), \
            piece, labels[at:end], np.arange(at, end, dtype=np.int64)
        at = end
    extra = len(held) + sum(len(b) for b in batches)
    if extra:
        raise CorruptData(where, f"yielded {at + extra} examples, its header says "
                                 f"{split.header.count}")


def _open(pq, file, schema, write_batch=WRITE_BATCH):
    """A ParquetWriter on file, its columns as datasets writes them (arrow_writer.py)."""
    extra = schema.names[2:]
    return pq.ParquetWriter(
        file, schema,  # PNG bytes neither compress nor repeat; labels do
        compression={"image.bytes": "none", "image.path": "none", "label": "snappy",
                     **{name: "snappy" for name in extra}},
        use_dictionary=["label", *extra],
        column_encoding={"image.bytes": "PLAIN", "image.path": "PLAIN"},
        write_page_index=True, write_batch_size=write_batch)


def _row_group(pa, group, schema):
    """One row group as an Arrow table: contiguous buffers, whatever the pieces (a
    group of one piece is not copied)."""
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
    data = group[0][1] if len(group) == 1 else b"".join(d for _, d, *_ in group)
    images = pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(
        offsets.astype(np.int32)), pa.py_buffer(data)])
    paths = pa.nulls(n, pa.string())
    image = pa.StructArray.from_arrays([images, paths], fields=list(schema.field("image").type))
    # from_buffers, not pa.array: pa.array imports pandas when it is installed.
    labels = np.ascontiguousarray(np.concatenate([g[2] for g in group]), np.int64)
    label = pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(labels)])
    columns = [image, label]
    if len(schema.names) > 2:  # the extra fields, int32 columns
        table = np.concatenate([g[3] for g in group]).astype("<i4", copy=False)
        columns += [pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(
            np.ascontiguousarray(table[:, j]))]) for j in range(table.shape[1])]
    return pa.Table.from_arrays(columns, schema=schema)


def _output(target, tmp):
    return OutputFile(target, own_file_size(tmp), sha256_file(tmp))


@dataclass
class ParquetCounters(Counters):
    """A shard's rows (its records), Arrow bytes, and the row groups write() counts for it."""

    arrow_bytes: int = 0
    row_groups: int = 0


class ParquetWrite(ShardedWrite):
    """A Parquet shard set written shard by shard (mnistconv.formats.contract), with the bytes
    write() gives each shard: row groups restart at every shard start (_cuts), so a
    shard's bytes depend on its rows and the options only. finish() writes the README.md
    card (croissant.json is the describe step's, which every runner takes). Extra fields
    (QMNIST's columns) are int32 columns after label, the same in every split (one
    schema, one features list)."""

    counters = ParquetCounters

    def __init__(self, dataset, path, options):
        self.pa, self.pq = pyarrow("writing Parquet")
        pa = self.pa
        self.dataset, self.path, self.options = dataset, str(path), options
        path, config = self.path, options.config
        if not dataset.splits:
            raise NoSplits(path, "nothing to write: the input has no splits")
        self.one_file = path.lower().endswith(".parquet")
        from ...family.identity import given
        if given(options) and self.one_file:
            raise UsageError(path, "one .parquet file holds no README.md or croissant.json "
                                   "to state --name, --license, ... in",
                             "name a directory for the Hub's layout")
        if config is not None:
            check_option_name(config, "--config")
            if self.one_file:
                raise UsageError(path, "--config names a folder of a Parquet directory; "
                                       "this output is one file", "name a directory instead")
        self.shards = shards = check_shard_count(1 if options.shards is None
                                                 else options.shards)
        self.row_group = int(default_row_group(s.header.shape for s in dataset.splits.values())
                             if options.row_group_size is None else options.row_group_size)
        if self.one_file and (len(dataset.splits) > 1 or shards > 1):
            raise UsageError(path, f"one .parquet file holds one split, this input has "
                                   f"{len(dataset.splits)} and --shards {shards}",
                             "choose one with --split, or name a directory for the Hub's "
                             "layout")
        self.labels = {}
        for name, split in dataset.splits.items():
            safe_split_name(name, split.header.source or path)
            self.labels[name] = _check_split(split)
        self.names = _class_names(dataset, self.labels)
        found = {name: extras.checked(split, ("image", "label"))
                 for name, split in dataset.splits.items()}
        extra_names = extras.same_names(found, path)
        self.schema = pa.schema(
            [("image", pa.struct([("bytes", pa.binary()), ("path", pa.string())])),
             ("label", pa.int64())] + [(n, pa.int32()) for n in extra_names],
            metadata={"huggingface": card.features_json(self.names, extra_names)})
        self.tables = {name: e[1] if e else None for name, e in found.items()}
        self.folder = config or "data"
        self.tasks = {tuple(s.header.shape): _PngTask(s.header.shape)
                      for s in dataset.splits.values()}
        self.largest = max(int(np.prod(shape)) for shape in self.tasks)  # bytes an image
        self.piece = budget.piece_rows(self.largest, PIECE)
        self.write_batch = max(1, min(WRITE_BATCH, DATA_PAGE_BYTES // self.largest))
        if any(t is not None for t in self.tables.values()):
            extras.kept(dataset)  # int32 columns after label
        self.targets, self.stale = [], []
        for name, split in dataset.splits.items():
            bounds = shard_bounds(split.header.count, shards)
            for index, stop in enumerate(bounds):
                self.targets.append(ShardTarget(
                    name, index, path if self.one_file else os.path.join(
                        path, self.folder, f"{name}-{index:05d}-of-{shards:05d}.parquet"),
                    bounds[index - 1] if index else 0, stop))
        if not self.one_file:
            self.stale = self._earlier_files(path)

    def _earlier_files(self, path):
        """The data files an earlier write left: `<config>/<split>[-shard].parquet` in
        any config folder (other shard counts, splits or config), but ours."""
        keep = {os.path.abspath(t.path) for t in self.targets}
        # (in another folder, only the names this writer gives a folder output: sharded)
        ours = re.compile(r"[A-Za-z0-9_.-]+?(-\d{5}-of-\d{5})?\.parquet")
        other = re.compile(r"[A-Za-z0-9_.-]+-\d{5}-of-\d{5}\.parquet")
        found = []
        for config in output_entries(path, path):
            folder = os.path.join(path, config)
            if config.startswith(".") or not os.path.isdir(folder) \
                    or os.path.islink(folder):
                continue
            pattern = ours if config == self.folder else other
            found += [os.path.join(folder, n) for n in output_entries(folder, path)
                      if pattern.fullmatch(n)
                      and os.path.abspath(os.path.join(folder, n)) not in keep]
        return found

    def shared(self, records):
        """The PNG encoders of every split's image shape."""
        return ParallelEncoder(list(self.tasks.values()), check_workers(self.options.workers),
                               self.options.processes,
                               self.largest, self.piece,
                               total=records)

    def write_shards(self, encoder, name, paths):
        """Shards of split `name` at paths ({index: staged path}) from one pass over its
        rows (only theirs when the split can seek and not every shard is asked for):
        {index: ParquetCounters}."""
        split = self.dataset.splits[name]
        labels, extra = self.labels[name], self.tables[name]
        cuts = _cuts([t for t in self.targets if t.split == name], self.row_group, self.piece)
        if len(paths) < self.shards and split.can_seek:
            pieces = self._taken(split, labels, extra, cuts, paths)
        else:  # a stream, or every shard: the split's pieces in order
            pieces = (p for p in _pieces(split, labels, cuts, self.progress, extra, self.piece)
                      if p[0][0] in paths)
        counters = {shard: ParquetCounters() for shard in paths}
        if 0 in counters:  # write() counts ceil(rows / row group size) per split
            counters[0].row_groups = -(-split.header.count // self.row_group)
        files, writers = [], {}
        group = []  # (offsets, data, labels, extra fields) of the row group being gathered
        try:
            for shard, path in paths.items():  # empty shards (fewer rows) still exist
                files.append(open_staged(path))
                writers[shard] = _open(self.pq, files[-1], self.schema, self.write_batch)
            for (shard, closes, piece_labels, piece_extras), n, data, _ in \
                    encoder.encode(self.tasks[tuple(split.header.shape)], pieces):
                data = bytes(data)  # may be a view of a worker's slot, reused next
                offsets = np.frombuffer(data, np.int32, n + 1)
                # (a view: slicing the bytes would copy the piece's PNGs once more)
                group.append((offsets, memoryview(data)[4 * (n + 1):], piece_labels,
                              piece_extras))
                counters[shard].records += n
                del data, offsets  # the group holds them, and lets them go when written
                if closes:
                    table = _row_group(self.pa, group, self.schema)
                    group = []
                    writers[shard].write_table(table, row_group_size=table.num_rows)
                    counters[shard].arrow_bytes += table.nbytes
                    del table
        finally:
            for writer in writers.values():
                writer.close()
            for file in files:
                file.close()
        return counters

    def _taken(self, split, labels, extra, cuts, paths):
        """The pieces of the shards in paths, their rows taken alone."""
        starts = [0] + [end for _, end, _ in cuts[:-1]]
        for (shard, end, closes), at in zip(cuts, starts):
            if shard in paths:
                rows = np.arange(at, end, dtype=np.int64)
                yield ((shard, closes, labels[at:end],
                        None if extra is None else extra[at:end]),
                       split.take(rows), labels[at:end], rows)
                self.advance(end - at)

    def write_targets(self, targets, paths):
        """Shards of one split at paths, from one pass over its rows."""
        with self.session(sum(t.stop - t.start for t in targets)) as encoder:
            counters = self.write_shards(encoder, targets[0].split, paths)
        return {t.path: (_output(t.path, paths[t.index]), counters[t.index])
                for t in targets}

    def stats(self, counters):
        """write()'s stats: the row groups."""
        return {"row_groups": counters.row_groups}

    def metadata_targets(self):
        """The card, README.md, unless the output is one file."""
        return [] if self.one_file else [os.path.join(self.path, "README.md")]

    def card(self, recorded):
        """README.md's bytes from the recorded shards ({path: (OutputFile, counters)})."""
        splits = []
        for name, split in self.dataset.splits.items():
            mine = [recorded[t.path] for t in self.targets if t.split == name]
            splits.append((name, split.header.count, sum(c.arrow_bytes for _, c in mine),
                           sum(f.bytes for f, _ in mine)))
        from ...family.identity import add_note, resolve
        identity = resolve(self.dataset, self.path, self.options)
        add_note(self.dataset, identity)
        return card.dataset_card(self.options.config or "default", self.folder, self.names,
                                 splits, self.schema.names[2:], identity).encode("utf-8")

    def finish(self, recorded, staged):
        """Write README.md from the recorded shards, as write() does."""
        if self.one_file:
            return []
        tmp = staged.file(self.metadata_targets()[0])
        with open_staged(tmp) as f:
            f.write(self.card(recorded))
        return [_output(self.metadata_targets()[0], tmp)]


def prepare_write(dataset, path, options) -> ParquetWrite:
    """The sharded write of dataset to path with options (SPEC.options())."""
    return ParquetWrite(dataset, path, options)
