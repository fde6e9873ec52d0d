"""Which files make a TFRecord dataset: names of outputs (one split, several splits,
a directory) and how a path given to read() becomes splits of files.

A split written alone goes to the path itself; several go beside it as
`<stem>-<split><ext>` (m.tfrecord -> m-train.tfrecord, m-test.tfrecord; a compression
suffix stays last), or into a directory as `<split>.tfrecord`. Shard sets follow
mnistconv.shards. A split's name is read back from its file name (train, test, t10k,
validation, valid, val), else the file's own name is the split's.
"""

import glob
import os
import re

from ...errors import UsageError
from ...fileio import check_input_file, is_stdio
from ...shards import (SHARD_RE, data_files_in, expand_shards, find_shard_set, group_shards,
                       is_data_name, shard_numbers)

EXTENSIONS = (".tfrecord", ".tfrecords", ".tfrec")
_SPLIT_WORDS = {"train": "train", "test": "test", "t10k": "test", "validation": "validation",
                "valid": "validation", "val": "validation"}


def matches_name(path) -> bool:
    """The name says TFRecord: a .tfrecord/.tfrecords/.tfrec extension (before .gz), or
    a shard name."""
    name = os.path.basename(str(path).rstrip("/")).lower()
    if name.endswith(".gz"):
        name = name[:-3]
    return name.endswith(EXTENSIONS) or ".tfrecord" in name or \
        SHARD_RE.match(name) is not None


def split_target(path, split_name, several):
    """Where a split goes: <dir>/<split>.tfrecord for a directory (existing, or a path
    ending in '/'); else the path itself for a single split, name-<split>.ext for
    several."""
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


def split_name_of(base, default="train"):
    """train/test/validation from a file name (t10k -> test), else the default."""
    name = os.path.basename(base).lower()
    for ext in EXTENSIONS:
        if name.endswith(ext):
            name = name[:-len(ext)]
    for word in re.split(r"[-_.]", name)[::-1]:
        if word in _SPLIT_WORDS:
            return _SPLIT_WORDS[word]
    return default


def resolve(path):
    """{split name: [files]} for a file, a shard (-of- name), a glob, a directory, or a
    name that was written as shards or per-split files."""
    path = str(path)
    if os.path.isdir(path):
        files = data_files_in(path, matches_name)
        if not files:
            raise UsageError(path, "directory holds no .tfrecord files")
        return _name_groups(group_shards(files))
    if os.path.exists(path):
        check_input_file(path)
        if SHARD_RE.match(os.path.basename(path)):
            base = shard_numbers(path)[0]
            return {split_name_of(base): expand_shards(path)}
        return {split_name_of(path): [path]}
    if glob.has_magic(path):
        files = sorted(f for f in glob.glob(path) if os.path.isfile(f)
                       and is_data_name(f))
        if not files:
            raise UsageError(path, "no file matches this pattern")
        return {split_name_of(path.replace("*", "").replace("?", "")): files}
    # What write() makes of this name: shards of it, or one file (set) per split.
    shards = find_shard_set(path)
    if shards:
        return {split_name_of(path): shards}
    directory, name = os.path.split(path)
    stem, ext = name, ""
    for e in EXTENSIONS:
        if name.lower().endswith(e):
            stem, ext = name[:-len(e)], name[-len(e):]
    siblings = glob.glob(os.path.join(glob.escape(directory) or ".",
                                      glob.escape(stem) + "-*" + glob.escape(ext) + "*"))
    siblings = [s for s in siblings if os.path.isfile(s) and matches_name(s)
                and is_data_name(s)]
    if siblings:
        return _name_groups(group_shards(siblings))
    raise UsageError(path, "no such file or directory")


def _name_groups(groups):
    named = {}
    for base, files in groups.items():
        name = split_name_of(base, default=os.path.basename(base))
        if name in named:
            name = os.path.basename(base)
        named[name] = files
    return dict(sorted(named.items(), key=lambda kv: _split_order(kv[0])))


def _split_order(name):
    return (["train", "validation", "test"].index(name) if name in
            ("train", "validation", "test") else 3, name)
