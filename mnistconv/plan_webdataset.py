"""WebDataset in a shard plan (mnistconv.plan): one tar shard written alone with the
bytes formats/webdataset/format.write() gives it.

Shards cut by samples (--shard-size 10000, or the default: see write()) plan: shard k holds
samples k*size up to (k+1)*size of its split, keyed by their position in the split, and
a tar shard's bytes depend on its samples only (every header has mtime 0, uid/gid 0, the
archive ends with its end blocks padded to a 10240-byte record). Shards cut by bytes do
not: where one starts follows the encoded size of every sample before it. An empty
split still gets one (empty) shard, as write() gives it. WebDataset writes nothing
beside its shards, so there is no finishing step beyond checking every shard's hash.

It uses the writer's own pieces (_checked, _Shards, _pieces, split_output, _family), so
a shard is checked, encoded and closed by the same code as in a whole-set write.
"""

import os

from .errors import CorruptData, UsageError


def _setup(dataset, path, options):
    """write()'s checks and what every shard shares; a usage error for byte-cut shards."""
    from .formats.webdataset import format as w
    setup = w._checked(dataset, path, options.get("shard_size"),
                       options.get("image_format", "png"), options.get("jpeg_quality", 95),
                       options.get("workers", 1))
    if setup[3]:  # bytes per shard
        # (parse_shard_size took it: digits and a unit, nothing to escape)
        raise UsageError(None, f"--shard-size {options.get('shard_size')} cuts "
                               "WebDataset shards by bytes: where each starts follows "
                               "every sample's encoded size, so they cannot be planned",
                         "plan with a number of samples per shard, e.g. --shard-size 10000")
    return setup


def _bounds(count, samples):
    """Where each shard of a split ends: every `samples`, one shard for an empty split."""
    return [min(count, (k + 1) * samples) for k in range(max(1, -(-count // samples)))]


def sets(dataset, path, options):
    """(split, shard paths, bounds, superseded shards of an earlier set) per split."""
    from .formats.webdataset import format as w
    directory, name, samples, _, _, plan, _ = _setup(dataset, path, options)
    out = []
    for split, _, _ in plan:
        bounds = _bounds(split.header.count, samples[split.name])
        targets = [os.path.join(directory, w.shard_name(name, split.name, k))
                   for k in range(len(bounds))]
        keep = {os.path.abspath(t) for t in targets}
        stale = [f for f in w._family(directory, name, split.name)
                 if os.path.abspath(f) not in keep]
        out.append((split, targets, bounds, stale))
    return out


class _OneFile:
    """Stands for a StagedOutput in _Shards: the plan staged the one file already."""

    def __init__(self, staged_path):
        self.staged_path = staged_path

    def file(self, target):
        """The staged path, whatever the shard's name."""
        return self.staged_path


def write_shard(dataset, path, split_name, index, staged_path, options):
    """Shard `index` of a split at staged_path: (OutputFile, [samples])."""
    from .formats.webdataset import format as w
    from .parallel import ParallelEncoder
    from .plan import RangeSplit
    directory, name, samples, _, workers, plan, chunk = _setup(dataset, path, options)
    split, task, table = next(p for p in plan if p[0].name == split_name)
    samples = samples[split.name]
    count = split.header.count
    start, stop = index * samples, min(count, (index + 1) * samples)
    shards = w._Shards(_OneFile(staged_path), directory, name, split.name, samples, None)
    shards.number = index  # names the shard (its OutputFile path)
    task.warm()
    written = 0
    with ParallelEncoder([task], workers, options.get("processes", False),
                         w._record_room([task]), chunk, total=stop - start) as encoder:
        pieces = w._pieces(RangeSplit(split, start, stop), chunk, samples,
                           task.slot_shape[0], first=start,
                           table=None if table is None else table[start:stop])
        for _, n, data, (length, _, _) in encoder.encode(task, pieces):
            body, sizes = w.split_output(data, length, n)
            shards.add(body, sizes)
            written += n
    files = shards.close()
    if written != stop - start:
        raise CorruptData(split.header.source or split.name,
                          f"yielded {start + written} examples, its header says {count}")
    return files[0], [written]


# What write_shard counts for a shard (samples): a progress record's entry holds as
# many numbers, else it is not trusted.
COUNTERS = 1


def stats(counters, options):
    """write()'s stats from every shard's counters."""
    return {"samples": sum(c[0] for c in counters), "shards": len(counters)}
