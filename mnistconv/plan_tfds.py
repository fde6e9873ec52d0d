"""The TFDS directory in a shard plan (mnistconv.plan): one shard written alone with the
bytes formats/tfds/format.write() gives it, and dataset_info.json, features.json and
label.labels.txt written once every shard is there.

How write() cuts a split (format.py, shardwrite.py): the records in the input's order
(mnistconv writes no key-hash shuffle: TFDS' shuffle is its own generator's order,
and the input's order is kept), records bounds[i-1]..bounds[i] to shard i with TFDS'
rounded bounds (info.tfds_bounds); a record's bytes depend on its image and label only.
So shard i is records start..stop of the split, encoded by the same ExampleTask,
spooled and cut by the same shardwrite functions as a whole split (a RangeSplit).

The shard count is --shards, else it follows the encoded size (TFDS' rule, or
--shard-size), which only the whole encoding knows. A plan decides it from the header
anyway when every possible encoding gives the same count: a record is at least the PNG's
fixed chunks (57 bytes) and at most zlib's worst case for the rows plus the PNG and
Example framing (_record_bounds); the count is monotone in the size, so equal counts at
both ends decide it (MNIST: one shard). Otherwise planning asks for --shards. When
finishing, the real sizes (the shards' recorded counters) are checked to give the
planned count.

dataset_info.json needs each split's numBytes and shard lengths: summed from the shards'
recorded counters [records, bytes of serialized Examples].
"""

import os

from .errors import CorruptData, FormatError, UsageError

# A PNG's signature, IHDR chunk, one IDAT chunk's framing and IEND: no record is smaller.
_PNG_FIXED = 8 + 25 + 12 + 12
# The Example around the PNG and the label: 33 to 44 bytes measured (int64 labels,
# varint lengths); 96 bounds it for any label and PNG length.
_EXAMPLE_MOST = 96


def _record_bounds(shape):
    """(fewest, most) bytes of one serialized Example of an H x W image: the most is
    zlib's worst case (deflateBound's, for non-default settings) of the filtered rows
    in 8192-byte IDAT chunks, plus the PNG's fixed chunks and the Example's framing."""
    h, w = shape
    rows = h * (w + 1)
    deflated = rows + (rows + 7) // 8 + (rows + 63) // 64 + 5 + 6
    return _PNG_FIXED, _PNG_FIXED + deflated + 12 * -(-deflated // 8192) + _EXAMPLE_MOST


def _setup(dataset, path, options):
    """write()'s checks (format._checked) and each split's planned shard count:
    (name, version, file format, target directory, [(split name, split, shards)], shape,
    number of classes, class names, --shards, --shard-size in bytes)."""
    from .formats.tfds import format as f
    file_format = options.get("file_format") or "tfrecord"
    name, version, shards, shard_size, _, target, plan, shape, num_classes, names = \
        f._checked(dataset, path, True, options.get("name"),
                   options.get("version") or f.DEFAULT_VERSION, options.get("shards"),
                   options.get("shard_size"), file_format, 1)
    least, most = _record_bounds(shape)
    splits = []
    for split_name, split, _ in plan:
        count = split.header.count
        if shards is not None:
            n = shards
        else:
            low, high = (f._shard_count(None, shard_size, b * count, count, split_name,
                                        path) for b in (least, most))
            if low != high:
                rule = f"--shard-size {options['shard_size']}" if shard_size else \
                    "TFDS' rule (64 MiB to 1 GiB a shard)"
                raise UsageError(path, f"split {split_name}: {rule} gives {low} to {high} "
                                       f"shards for {count:,} images, depending on how "
                                       "well they compress, so a plan cannot be cut "
                                       "from the header", "give --shards N to plan it")
            n = low
        splits.append((split_name, split, n))
    return name, version, file_format, target, splits, shape, num_classes, names, \
        shards, shard_size


def _targets(setup, split_name, n):
    from .formats.tfds import info
    name, _, file_format, target = setup[:4]
    return [os.path.join(target, info.shard_name(name, split_name, file_format, i, n))
            for i in range(n)]


def sets(dataset, path, options):
    """(split, shard paths, bounds, files of an earlier write the set supersedes)."""
    from .formats.tfds import format as f, info
    setup = _setup(dataset, path, options)
    out = []
    for split_name, split, n in setup[4]:
        out.append((split, _targets(setup, split_name, n), info.tfds_bounds(
            split.header.count, n), []))
    keep = {os.path.basename(t) for _, targets, _, _ in out for t in targets}
    keep |= set(f._METADATA) | {"label.labels.txt"}
    stale = [os.path.join(setup[3], e) for e in f._stale_files(setup[3], keep)]
    if out:  # superseded once, with the first split
        out[0] = out[0][:3] + (stale,)
    return out


def write_shard(dataset, path, split_name, index, staged_path, options):
    """Shard `index` of a split at staged_path: (OutputFile, [records, bytes of their
    serialized Examples])."""
    import tempfile
    import numpy as np
    from .codecs import spool as shardwrite, tfds_encode as encode
    from .formats.tfds import info
    from .parallel import ParallelEncoder, check_workers
    from .plan import RangeSplit
    from .records import NO_PROGRESS
    from .staging import staging_prefix
    setup = _setup(dataset, path, options)
    file_format, shape, num_classes = setup[2], setup[5], setup[6]
    split, n = next((s, n) for name, s, n in setup[4] if name == split_name)
    bounds = info.tfds_bounds(split.header.count, n)
    start, stop = (bounds[index - 1] if index else 0), bounds[index]
    target = _targets(setup, split_name, n)[index]
    task = encode.ExampleTask(num_classes, shape)
    task.warm()
    # A TFRecord shard is its spool; ArrayRecord's records are copied out of one.
    spool = staged_path
    if file_format != "tfrecord":
        fd, spool = tempfile.mkstemp(dir=os.path.dirname(staged_path),
                                     prefix=staging_prefix(os.path.basename(target)))
        os.close(fd)
    try:
        with ParallelEncoder([task], check_workers(options.get("workers", 1)),
                             options.get("processes", False), int(np.prod(shape)),
                             encode.chunk_records(shape), total=stop - start) as encoder:
            with shardwrite.naming_failures(target):
                lengths = shardwrite.spool_split(RangeSplit(split, start, stop), task,
                                                 encoder, spool, NO_PROGRESS, "")
        if len(lengths) != stop - start:
            raise CorruptData(split.header.source or split_name,
                              f"yielded {start + len(lengths)} examples, its header says "
                              f"{split.header.count}")
        cut = [len(lengths)]
        if file_format == "tfrecord":
            written = shardwrite.tfrecord_shards(spool, lengths, cut, [target], [staged_path])
        else:
            written = shardwrite.array_record_shards(spool, lengths, cut, [target],
                                                     [staged_path], "group_size:1")
    finally:
        if spool != staged_path and os.path.exists(spool):
            from .staging import remove_scratch
            remove_scratch(spool)
    return written[0], [len(lengths), int(lengths.sum())]


# What write_shard counts for a shard (records, bytes of serialized Examples): a progress
# record's entry holds as many numbers, else it is not trusted.
COUNTERS = 2


def stats(counters, options):
    """write()'s stats from every shard's counters."""
    return {"records": sum(c[0] for c in counters), "shards": len(counters)}


def finish_targets(dataset, path, options):
    """The metadata files finish() writes."""
    from .formats.tfds import format as f
    target = _setup(dataset, path, options)[3]
    return [os.path.join(target, name) for name in list(f._METADATA) + ["label.labels.txt"]]


def finish(dataset, path, options, recorded):
    """Write dataset_info.json, features.json and label.labels.txt from the recorded
    shards' counters, once the real sizes are checked to give the planned counts."""
    import numpy as np
    from .fileio import StagedOutput, open_staged
    from .formats.tfds import format as f, info
    setup = _setup(dataset, path, options)
    name, version, file_format, target, splits, shape, num_classes, names, shards, \
        shard_size = setup
    root = os.path.dirname(os.path.abspath(str(path)))
    described = []
    for split_name, split, n in splits:
        entries = [recorded[os.path.relpath(os.path.abspath(t), root)]
                   for t in _targets(setup, split_name, n)]
        lengths = [e["counters"][0] for e in entries]
        num_bytes = sum(e["counters"][1] for e in entries)
        count = split.header.count
        real = f._shard_count(shards, shard_size, num_bytes, count, split_name, path)
        if lengths != np.diff([0] + info.tfds_bounds(count, n)).tolist() or real != n:
            raise FormatError(target, f"split {split_name}: the shards hold {lengths} "
                                      f"records, {num_bytes:,} bytes ({real} shards by the "
                                      f"rule), the plan {n} shards",
                              "run the conversion again with --force")
        described.append((split_name, num_bytes, lengths))
    with StagedOutput(force=True) as staged:
        for file_name, data in f.metadata_files(name, version, file_format, described,
                                                shape, num_classes, names):
            with open_staged(staged.file(os.path.join(target, file_name))) as out:
                out.write(data)
