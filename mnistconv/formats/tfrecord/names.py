"""Which files make a TFRecord dataset: a split written alone goes to the path itself,
several beside it as `<stem>-<split><ext>` (m.tfrecord -> m-train.tfrecord), or into a
directory as `<split>.tfrecord`; shard sets follow mnistconv.io.shards. Reading, a split's
name comes back from its file name (train, test, t10k, ...), else is the file's own.
"""

import os

from ...io import shards
from ...io.fileio import is_stdio
from ...io.shards import SHARD_RE

EXTENSIONS = (".tfrecord", ".tfrecords", ".tfrec")
INDEX_SUFFIX = ".idx"


def matches_name(path) -> bool:
    """The name says TFRecord: a .tfrecord/.tfrecords/.tfrec extension (before .gz), or
    a shard name."""
    name = os.path.basename(str(path).rstrip("/")).lower()
    if name.endswith(INDEX_SUFFIX):  # a record index beside a file (index_files.py)
        return False
    if name.endswith(".gz"):
        name = name[:-3]
    return name.endswith(EXTENSIONS) or ".tfrecord" in name or \
        SHARD_RE.match(name) is not None


def split_target(path, split_name, several):
    """Where a split goes: <dir>/<split>.tfrecord for a directory (existing, or a path
    ending in '/'), else the path itself for one split, name-<split>.ext for several."""
    if is_stdio(path):
        return path
    if str(path).endswith(os.sep) or os.path.isdir(path):
        return os.path.join(path, f"{split_name}.tfrecord")
    if not several:
        return path
    directory, name = os.path.split(path)
    # A compression suffix stays last: m.tfrecord.gz -> m-train.tfrecord.gz.
    compressed = next((c for c in (".gz", ".zz", ".zlib") if name.lower().endswith(c)), "")
    core, compressed = name[:len(name) - len(compressed)], name[len(name) - len(compressed):]
    for ext in EXTENSIONS:
        if core.lower().endswith(ext):
            stem, ext = core[:-len(ext)], core[-len(ext):]
            break
    else:
        stem, ext = core, ""
    return os.path.join(directory, f"{stem}-{split_name}{ext}{compressed}")


def resolve(path):
    """{split name: [files]} for a file, a shard (-of- name), a glob, a directory, or a
    name that was written as shards or per-split files (shards.resolve_inputs)."""
    groups = shards.resolve_inputs(path, EXTENSIONS, matches_name, ".tfrecord")
    # A glob or a shard set also finds the record indexes beside the files: not data.
    kept = {name: [f for f in files if not f.lower().endswith(INDEX_SUFFIX)]
            for name, files in groups.items()}
    kept = {name: files for name, files in kept.items() if files}
    if not kept:
        from ...errors import UsageError
        raise UsageError(path, "names only record index files (.idx)",
                         "name the TFRecord files they index")
    return kept
