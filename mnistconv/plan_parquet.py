"""Hugging Face Parquet in a shard plan (mnistconv.plan): one shard file written alone
with the bytes formats/parquet/writer.write() gives it, and the README.md card and
croissant.json (mnistconv.croissant) written once every shard is there.

It uses the writer's own pieces (_check_split, _class_names, _cuts, _PngTask,
_row_group, _open, card.dataset_card), so a shard is cut into the same row groups and
encoded by the same code: row groups restart at every shard start (writer._cuts), so a
shard's bytes depend on its rows and the options only. The card needs each split's
Arrow bytes and file sizes: they are summed from the shards' recorded counters.
"""

import os

import numpy as np

from .records import OutputFile, Split


def _setup(dataset, path, options):
    """write()'s checks and what every shard shares: (pa, pq, labels per split, class
    names, schema, one_file, folder, shards, row_group, extra fields per split)."""
    from .formats.parquet import writer as w
    pa, pq = w.pyarrow("writing Parquet")
    return (pa, pq) + w.checked_setup(dataset, path, options.get("config"),
                                      options.get("shards"), options.get("row_group_size"))


def sets(dataset, path, options):
    """(split, shard paths, bounds, superseded files) for every split."""
    from .formats.parquet import writer as w
    from .shards import shard_bounds
    *_, one_file, folder, shards, _, _ = _setup(dataset, path, options)
    out = []
    for name, split in dataset.splits.items():
        if one_file:
            targets, stale = [str(path)], []
        else:
            targets = [os.path.join(str(path), folder, f"{name}-{i:05d}-of-{shards:05d}"
                                                       ".parquet") for i in range(shards)]
            keep = {os.path.basename(t) for t in targets}
            stale = w._existing_shards(os.path.join(str(path), folder), name, keep)
        out.append((split, targets, shard_bounds(split.header.count, shards), stale))
    return out


def write_shard(dataset, path, split_name, index, staged_path, options):
    """Shard `index` of a split at staged_path; (OutputFile, [rows, Arrow bytes,
    row groups write() counts for it])."""
    from .fileio import sha256_file
    from .formats.parquet import writer as w
    from .parallel import ParallelEncoder, check_workers
    pa, pq, labels, _, schema, one_file, folder, shards, row_group, tables = \
        _setup(dataset, path, options)
    split = dataset.splits[split_name]
    labels, extra = labels[split_name], tables[split_name]
    cuts = w._cuts(split.header.count, shards, row_group)
    if type(split).take is not Split.take:  # seekable: read the shard's rows only
        mine = [c for c in cuts if c[0] == index]
        ends = [end for _, end, _ in cuts]
        first = cuts.index(mine[0]) if mine else 0
        starts = [ends[first - 1] if first else 0] + [end for _, end, _ in mine[:-1]]

        def pieces():
            for (shard, end, closes), at in zip(mine, starts):
                yield ((shard, closes, labels[at:end],
                        None if extra is None else extra[at:end]),
                       split.take(np.arange(at, end, dtype=np.int64)), labels[at:end],
                       np.arange(at, end, dtype=np.int64))
        source = pieces()
    else:  # a stream: the writer's own pieces, up to this shard
        from .records import NO_PROGRESS
        source = (p for p in w._pieces(split, labels, cuts, NO_PROGRESS, extra)
                  if p[0][0] == index)
    task = w._PngTask(split.header.shape)
    arrow_bytes, rows, group = 0, 0, []
    parquet = w._open(pq, staged_path, schema)
    try:
        with ParallelEncoder([task], check_workers(options.get("workers", 1)),
                             options.get("processes", False),
                             int(np.prod(split.header.shape)), w.PIECE) as encoder:
            for (_, closes, piece_labels, piece_extras), n, data, _ in \
                    encoder.encode(task, source):
                data = bytes(data)
                offsets = np.frombuffer(data, np.int32, n + 1)
                group.append((offsets, data[4 * (n + 1):], piece_labels, piece_extras))
                rows += n
                if closes:
                    table = w._row_group(pa, group, schema)
                    group = []
                    parquet.write_table(table, row_group_size=table.num_rows)
                    arrow_bytes += table.nbytes
    finally:
        parquet.close()
        parquet.file.close()
    target = sets_target(path, folder, one_file, split_name, index, shards)
    # write() counts ceil(rows / row group size) per split: shard 0 counts it.
    groups = -(-split.header.count // row_group) if index == 0 else 0
    return (OutputFile(target, os.path.getsize(staged_path), sha256_file(staged_path)),
            [rows, arrow_bytes, groups])


def sets_target(path, folder, one_file, split_name, index, shards):
    """The path a shard is committed at (as write() names it)."""
    if one_file:
        return str(path)
    return os.path.join(str(path), folder, f"{split_name}-{index:05d}-of-{shards:05d}"
                                           ".parquet")


# What write_shard counts for a shard (rows, Arrow bytes, row groups): a progress record's entry holds as
# many numbers, else it is not trusted.
COUNTERS = 3


def stats(counters, options):
    """write()'s stats from every shard's counters."""
    return {"row_groups": sum(c[2] for c in counters)}


def finish_targets(dataset, path, options):
    """The card, README.md, and croissant.json, unless the output is one .parquet file."""
    from .croissant import target
    return [] if str(path).lower().endswith(".parquet") else \
        [os.path.join(str(path), "README.md"), target(path)]


def finish(dataset, path, options, recorded):
    """Write README.md, the dataset card, from the recorded shards' counters, and
    croissant.json from their sizes and hashes, as a local write does."""
    from . import croissant
    from .fileio import StagedOutput, open_staged
    from .formats.parquet import card
    from .records import OutputFile, WriteResult
    *_, names, schema, one_file, folder, shards, _, _ = _setup(dataset, path, options)
    if one_file:
        return
    root = os.path.dirname(os.path.abspath(str(path)))
    card_splits, files = [], []
    for name, split in dataset.splits.items():
        arrow, size = 0, 0
        for index in range(shards):
            target = sets_target(path, folder, False, name, index, shards)
            entry = recorded[os.path.relpath(os.path.abspath(target), root)]
            arrow += entry["counters"][1]
            size += entry["bytes"]
            files.append(OutputFile(str(target), entry["bytes"], entry["sha256"]))
        card_splits.append((name, split.header.count, arrow, size))
    text = card.dataset_card(options.get("config") or "default", folder, names,
                             card_splits, schema.names[2:])
    with StagedOutput(force=True) as staged:
        with open_staged(staged.file(os.path.join(str(path), "README.md"))) as f:
            f.write(text.encode("utf-8"))
    croissant.write(dataset, path, WriteResult(files, {}), "parquet", force=True)
