"""The TFDS directory written shard by shard (mnistconv.contract): one shard alone with
the bytes format.write() gives it, and dataset_info.json, features.json and
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
"""

import os
from dataclasses import dataclass

from ...contract import Counters, ShardTarget, ShardedWrite
from ...errors import FormatError, UsageError
from . import format as f, info

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


@dataclass
class TfdsCounters(Counters):
    """A shard's records, the bytes of their serialized Examples, and 1 (the shard)."""

    records: int = 0
    num_bytes: int = 0
    shards: int = 0


class TfdsWrite(ShardedWrite):
    """The shards of a TFDS directory, each split's count decided from its header."""

    counters = TfdsCounters

    def __init__(self, dataset, path, options):
        self.path, self.options = path, options
        self.name, self.version, self.shards, self.shard_size, _, self.target, plan, \
            self.shape, self.num_classes, self.names = f.checked(dataset, path, options,
                                                                 force=True)
        least, most = _record_bounds(self.shape)
        self.splits, self.targets = [], []  # [(split name, split, shard count)]
        for split_name, split, _ in plan:
            count = split.header.count
            n = self.shards if self.shards is not None else self._count(
                split_name, count, least, most)
            self.splits.append((split_name, split, n))
            bounds = info.tfds_bounds(count, n)
            for i in range(n):
                self.targets.append(ShardTarget(
                    split_name, i, os.path.join(self.target, info.shard_name(
                        self.name, split_name, options.file_format, i, n)),
                    bounds[i - 1] if i else 0, bounds[i]))
        keep = {os.path.basename(t.path) for t in self.targets}
        keep |= set(f.METADATA) | {"label.labels.txt"}
        self.stale = [os.path.join(self.target, e) for e in f.stale_files(self.target, keep)]

    def _count(self, split_name, count, least, most):
        """The shard count TFDS' rule (or --shard-size) gives whatever the encoding."""
        low, high = (f.shard_count(None, self.shard_size, b * count, count, split_name,
                                   self.path) for b in (least, most))
        if low != high:
            rule = f"--shard-size {self.options.shard_size}" if self.shard_size else \
                "TFDS' rule (64 MiB to 1 GiB a shard)"
            raise UsageError(self.path, f"split {split_name}: {rule} gives {low} to {high} "
                                        f"shards for {count:,} images, depending on how "
                                        "well they compress, so a plan cannot be cut "
                                        "from the header", "give --shards N to plan it")
        return low

    def write_shard(self, index, staged_path):
        """Shard `index` at staged_path: (OutputFile, TfdsCounters)."""
        import tempfile
        import numpy as np
        from ...codecs import spool as shardwrite, tfds_encode as encode
        from ...parallel import ParallelEncoder, check_workers
        from ...plan import RangeSplit
        from ...records import NO_PROGRESS
        from ...staging import remove_scratch, staging_prefix
        target = self.targets[index]
        split = next(s for name, s, _ in self.splits if name == target.split)
        start, stop = target.start, target.stop
        task = encode.ExampleTask(self.num_classes, self.shape)
        task.warm()
        # A TFRecord shard is its spool; ArrayRecord's records are copied out of one.
        spool = staged_path
        if self.options.file_format != "tfrecord":
            fd, spool = tempfile.mkstemp(dir=os.path.dirname(staged_path),
                                         prefix=staging_prefix(os.path.basename(target.path)))
            os.close(fd)
        try:
            with ParallelEncoder([task], check_workers(self.options.workers),
                                 self.options.processes, int(np.prod(self.shape)),
                                 encode.chunk_records(self.shape),
                                 total=stop - start) as encoder:
                with shardwrite.naming_failures(target.path):
                    lengths = shardwrite.spool_split(RangeSplit(split, start, stop), task,
                                                     encoder, spool, NO_PROGRESS, "")
            if len(lengths) != stop - start:
                raise FormatError(split.header.source or target.split,
                                  f"yielded {start + len(lengths)} examples, its header "
                                  f"says {split.header.count}", "check the input")
            if self.options.file_format == "tfrecord":
                written = shardwrite.tfrecord_shards(spool, lengths, [len(lengths)],
                                                     [target.path], [staged_path])
            else:
                written = shardwrite.array_record_shards(spool, lengths, [len(lengths)],
                                                         [target.path], [staged_path],
                                                         "group_size:1")
        finally:
            if spool != staged_path and os.path.exists(spool):
                remove_scratch(spool)
        return written[0], TfdsCounters(len(lengths), int(lengths.sum()), 1)

    def stats(self, counters):
        """write()'s stats: records and shards."""
        return {"records": counters.records, "shards": counters.shards}

    def metadata_targets(self):
        """The metadata files finish() writes."""
        return [os.path.join(self.target, name)
                for name in list(f.METADATA) + ["label.labels.txt"]]

    def finish(self, recorded):
        """Write dataset_info.json, features.json and label.labels.txt from the recorded
        shards' counters, once the real sizes are checked to give the planned counts."""
        import numpy as np
        from ...fileio import StagedOutput, open_staged
        described = []
        for split_name, split, n in self.splits:
            counters = [recorded[t.path][1] for t in self.targets if t.split == split_name]
            lengths = [c.records for c in counters]
            num_bytes = sum(c.num_bytes for c in counters)
            count = split.header.count
            real = f.shard_count(self.shards, self.shard_size, num_bytes, count,
                                 split_name, self.path)
            if lengths != np.diff([0] + info.tfds_bounds(count, n)).tolist() or real != n:
                raise FormatError(self.target, f"split {split_name}: the shards hold "
                                               f"{lengths} records, {num_bytes:,} bytes "
                                               f"({real} shards by the rule), the plan {n} "
                                               "shards", "run the conversion again with "
                                                         "--force")
            described.append((split_name, num_bytes, lengths))
        with StagedOutput(force=True) as staged:
            for file_name, data in f.metadata_files(self.name, self.version,
                                                    self.options.file_format, described,
                                                    self.shape, self.num_classes,
                                                    self.names):
                with open_staged(staged.file(os.path.join(self.target, file_name))) as out:
                    out.write(data)


def prepare_write(dataset, path, options) -> TfdsWrite:
    """The sharded write of dataset to path with options (SPEC.options())."""
    return TfdsWrite(dataset, path, options)
