"""A split's Examples encoded once into a spool, then cut into shards (TFRecord: byte
ranges of it; ArrayRecord: through array_record's writer), since the number of shards
may depend on the encoded size (TFDS' rule). The one way both the arrayrecord format
and TFDS' array_record files are written: spool_splits() into a scratch_folder(), then
array_record_shards().
"""

import contextlib
import hashlib
import os
import sys
import tempfile

import numpy as np

from ..errors import MissingDependency, UsageError
from ..io.fileio import STAGING_MARK, create_staged, move_own, open_input, open_staged, \
    remove_scratch, signals_deferred, staging_prefix
from ..model.records import OutputFile
from . import tfds_encode as encode

_BLOCK = 1 << 20


@contextlib.contextmanager
def naming_failures(target):
    """A failed write to a spool (ENOSPC, EIO) names the output, not the scratch file."""
    try:
        yield
    except OSError as e:
        if e.filename is None or STAGING_MARK in str(e.filename):
            e.filename = str(target)
        raise


@contextlib.contextmanager
def scratch_folder(near, name):
    """A folder for spools in the nearest existing folder of `near`, removed on exit."""
    scratch = None
    try:
        # Signals wait until the folder is known, so `finally` removes it.
        with signals_deferred():
            near = os.path.abspath(near)
            while not os.path.isdir(near):
                near = os.path.dirname(near)
            scratch = tempfile.mkdtemp(prefix=staging_prefix(name), dir=near)
        yield scratch
    finally:
        if scratch:
            remove_scratch(scratch)


def spool_splits(jobs, encoder, scratch, progress, fmt) -> list:
    """[(split name, record lengths, spool path)] of (split name, split, task, target)
    jobs, each encoded into a spool of its own in scratch; a failed write names target."""
    spooled = []
    for name, split, task, target in jobs:
        spool = os.path.join(scratch, name)
        with naming_failures(target):
            create_staged(spool).close()
            spooled.append((name, spool_split(split, task, encoder, spool, progress,
                                              f"{name} -> {fmt}"), spool))
    return spooled


def spool_split(split, task, encoder, spool_path, progress, description):
    """Encode a split's records into spool_path: their data lengths (int64 array)."""
    lengths = []
    chunk = encode.chunk_records(task.shape)
    progress.start(description, split.header.count)
    try:
        with open_staged(spool_path) as spool:
            for _, n, data, _ in encoder.encode(task, encode.chunks(split, chunk)):
                spool.write(data)
                lengths += encode.record_lengths(data)
                progress.advance(n)
    finally:
        progress.finish()
    return np.array(lengths, np.int64)


def _hash_file(path, target):
    digest = hashlib.sha256()
    size = 0
    with open_input(path) as f:
        while block := f.read(_BLOCK):
            digest.update(block)
            size += len(block)
    return OutputFile(str(target), size, digest.hexdigest())


def tfrecord_shards(spool_path, lengths, bounds, targets, staged_paths) -> list:
    """Cut the spool into TFRecord shards (records up to bounds[i] each); removes it."""
    if len(targets) == 1:
        move_own(spool_path, staged_paths[0])
        return [_hash_file(staged_paths[0], targets[0])]
    ends = np.cumsum(lengths + 16)
    offsets = np.concatenate([[0], ends])
    files = []
    with open_input(spool_path) as spool:
        start = 0
        for end, target, path in zip(bounds, targets, staged_paths):
            first, last = int(offsets[start]), int(offsets[end])
            spool.seek(first)
            digest = hashlib.sha256()
            with open_staged(path) as out:
                left = last - first
                while left:
                    block = spool.read(min(_BLOCK, left))
                    digest.update(block)
                    out.write(block)
                    left -= len(block)
            files.append(OutputFile(str(target), last - first, digest.hexdigest()))
            start = end
    remove_scratch(spool_path)
    return files


def array_record_module():
    """array_record's writer and reader (the `arrayrecord` extra; Python 3.11+)."""
    if sys.version_info < (3, 11):
        raise UsageError(None, "ArrayRecord needs Python 3.11 or later (the array-record "
                               f"package); this is Python {sys.version_info[0]}."
                               f"{sys.version_info[1]}",
                         "run mnistconv on Python 3.11+, or write --to tfds with "
                         "--file-format tfrecord")
    try:
        from array_record.python import array_record_module
    except ImportError:
        raise MissingDependency("array-record", "arrayrecord", "ArrayRecord files") \
            from None
    if not _POOL_STARTED:
        # Start array_record's thread pool now: under a later ulimit -v its threads
        # fail to start and the reader's constructor waits on them forever.
        try:
            array_record_module.ArrayRecordReader(os.devnull)
        except (RuntimeError, ValueError):
            pass  # the pool is up either way; /dev/null is not a valid file
        _POOL_STARTED.append(True)
    return array_record_module


_POOL_STARTED = []


def check_writer_options(options):
    """The options string as array_record's parser judges it, before any output."""
    module = array_record_module()
    import tempfile
    with tempfile.TemporaryDirectory(prefix="mnistconv-ar-") as folder:
        try:
            module.ArrayRecordWriter(os.path.join(folder, "check"), options).close()
        except (ValueError, RuntimeError) as e:
            raise UsageError(None, f"array_record options {options!r}: "
                                   f"{str(e).splitlines()[0][:200]}",
                             "fix --array-record-options") from None
    return options


def array_record_shards(spool_path, lengths, bounds, targets, staged_paths,
                        options) -> list:
    """Write the spool's records into ArrayRecord shards; the spool is removed."""
    files = [array_record_shard(spool_path, lengths, start, end, target, path, options)
             for start, end, target, path in zip([0] + list(bounds[:-1]), bounds, targets,
                                                  staged_paths)]
    remove_scratch(spool_path)
    return files


def array_record_shard(spool_path, lengths, start, end, target, staged_path,
                       options) -> OutputFile:
    """The spool's records start..end as one ArrayRecord file at staged_path."""
    writer = array_record_module().ArrayRecordWriter(staged_path, options)
    try:
        with open_input(spool_path) as spool:
            spool.seek(int((lengths[:start] + 16).sum()))
            for n in lengths[start:end].tolist():
                record = spool.read(n + 16)
                writer.write(record[12:12 + n])
    finally:
        writer.close()
    return _hash_file(staged_path, target)
