"""WebDataset written shard by shard (mnistconv.contract): one tar shard alone with the
bytes format.write() gives it.

Shards cut by samples (--shard-size 10000, or the default: see write()) plan: shard k holds
samples k*size up to (k+1)*size of its split, keyed by their position in the split, and
a tar shard's bytes depend on its samples only (every header has mtime 0, uid/gid 0, the
archive ends with its end blocks padded to a 10240-byte record). Shards cut by bytes do
not: where one starts follows the encoded size of every sample before it. An empty
split still gets one (empty) shard, as write() gives it. WebDataset writes nothing
beside its shards, so there is no finishing step beyond checking every shard's hash.
"""

import os
from dataclasses import dataclass
from types import SimpleNamespace

from ...contract import Counters, ShardTarget, ShardedWrite
from ...errors import FormatError, UsageError
from . import format as w


@dataclass
class WebDatasetCounters(Counters):
    """A shard's samples, and 1 (the shard)."""

    samples: int = 0
    shards: int = 0


class WebDatasetWrite(ShardedWrite):
    """The tar shards of every split, cut by samples."""

    counters = WebDatasetCounters

    def __init__(self, dataset, path, options):
        self.options = options
        self.directory, self.name, self.samples, max_bytes, self.workers, self.plan, \
            self.chunk = w.checked(dataset, path, options)
        if max_bytes:
            # (parse_shard_size took it: digits and a unit, nothing to escape)
            raise UsageError(None, f"--shard-size {options.shard_size} cuts WebDataset "
                                   "shards by bytes: where each starts follows every "
                                   "sample's encoded size, so they cannot be planned",
                             "plan with a number of samples per shard, e.g. "
                             "--shard-size 10000")
        self.targets, self.stale = [], []
        for split, _, _ in self.plan:
            count, size = split.header.count, self.samples[split.name]
            # One shard for an empty split.
            for k in range(max(1, -(-count // size))):
                self.targets.append(ShardTarget(
                    split.name, k, os.path.join(self.directory,
                                                w.shard_name(self.name, split.name, k)),
                    min(count, k * size), min(count, (k + 1) * size)))
            keep = {os.path.abspath(t.path) for t in self.targets}
            self.stale += [p for p in w.family(self.directory, self.name, split.name)
                           if os.path.abspath(p) not in keep]

    def write_shard(self, index, staged_path):
        """Shard `index` at staged_path: (OutputFile, WebDatasetCounters)."""
        from ...parallel import ParallelEncoder
        from ...plan import RangeSplit
        target = self.targets[index]
        split, task, table = next(p for p in self.plan if p[0].name == target.split)
        start, stop = target.start, target.stop
        # A stand-in StagedOutput: the caller staged the shard's one file already.
        staged = SimpleNamespace(file=lambda target: staged_path)
        shards = w.ShardWriter(staged, self.directory, self.name, split.name,
                               self.samples[split.name], None)
        shards.number = target.index  # names the shard (its OutputFile path)
        task.warm()
        written = 0
        with ParallelEncoder([task], self.workers, self.options.processes,
                             w.record_room([task]), self.chunk,
                             total=stop - start) as encoder:
            pieces = w.sample_pieces(RangeSplit(split, start, stop), self.chunk,
                                     self.samples[split.name], task.slot_shape[0],
                                     first=start,
                                     table=None if table is None else table[start:stop])
            for _, n, data, (length, _, _) in encoder.encode(task, pieces):
                body, sizes = w.split_output(data, length, n)
                shards.add(body, sizes)
                written += n
        files = shards.close()
        if written != stop - start:
            raise FormatError(split.header.source or split.name,
                              f"yielded {start + written} examples, its header says "
                              f"{split.header.count}", "check the input")
        return files[0], WebDatasetCounters(written, 1)

    def stats(self, counters):
        """write()'s stats: samples and shards."""
        return {"samples": counters.samples, "shards": counters.shards}


def prepare_write(dataset, path, options) -> WebDatasetWrite:
    """The sharded write of dataset to path with options (SPEC.options())."""
    return WebDatasetWrite(dataset, path, options)
