"""Shard naming and shard sets, for every format whose output may be cut into files.

A shard set is `<base>-00000-of-00004` ... `<base>-00003-of-00004` (TensorFlow's and
TFDS' convention), records in shard order. This module knows names and files only.
An existing output is the whole family of the base name (the unsharded file and shard
sets of every size, which a glob over `base-*` would mix): refused without force, else
removed when the new set is committed. A name read from disk is checked (1..MAX_SHARDS,
index below the total) before anything is globbed, and a set with a missing shard is an
error, never a shorter dataset.
"""

import glob
import os
import re

from ..errors import FormatError, NotFound, UsageError
from .fileio import STAGING_MARK, check_input, check_input_file, input_entries, \
    output_entries
from ..limits import MAX_SHARDS, count_in_range, printable

SHARD_RE = re.compile(r"^(?P<base>.+)-(?P<index>\d{5})-of-(?P<total>\d{5})$")


def check_shard_count(value, option="--shards") -> int:
    """A requested number of shards, 1..limits.MAX_SHARDS, else a usage error."""
    return count_in_range(value, option, MAX_SHARDS)


def shard_names(base, shards, suffix_one=False) -> list:
    """The file names of `shards` shards of base; one shard is base itself unless
    suffix_one (TFDS names even a single shard -00000-of-00001)."""
    if shards == 1 and not suffix_one:
        return [str(base)]
    return [f"{base}-{i:05d}-of-{shards:05d}" for i in range(shards)]


def shard_bounds(count, shards) -> list:
    """Where each shard ends, in records, cut as evenly as integers allow: (10, 3) -> [3, 6, 10]."""
    return [count * (i + 1) // shards for i in range(shards)]


def is_shard_name(name) -> bool:
    """The name (not the path) of a file follows the -00000-of-00004 convention."""
    return SHARD_RE.match(os.path.basename(str(name))) is not None


def is_data_name(name) -> bool:
    """Neither a staging leftover nor any other hidden file: those are never data."""
    name = os.path.basename(str(name))
    return not name.startswith(".") and STAGING_MARK not in name


def sniff_files(path, matches_name, has_signature) -> bool:
    """has_signature(path) for a file; for a directory, whether one of its data files has it."""
    path = str(path)
    if not os.path.isdir(path):
        return has_signature(path)
    return any(has_signature(p) for p in input_entries(
        path, None, lambda n: matches_name(n) and is_data_name(n)))


def shard_numbers(path):
    """(base, index, total) of a shard's name, checked (a FormatError naming the file)."""
    name = os.path.basename(str(path))
    m = SHARD_RE.match(name)
    if m is None:
        raise FormatError(path, "not a shard name (<base>-00000-of-00004)", "name one shard of the set")
    index, total = int(m["index"]), int(m["total"])
    if not 1 <= total <= MAX_SHARDS or index >= total:
        raise FormatError(path, f"shard name {printable(name)} says shard {index} of "
                                f"{total}", f"a shard set has 1 to {MAX_SHARDS} files, "
                                "numbered from 00000 below the total")
    return m["base"], index, total


def expand_shards(path) -> list:
    """All files of the shard set of `path` (one of them), in order; none may be missing."""
    directory = os.path.dirname(str(path))
    base, _, total = shard_numbers(path)
    files = [os.path.join(directory, f"{base}-{i:05d}-of-{total:05d}")
             for i in range(total)]
    missing = [f for f in files if not os.path.lexists(f)]
    if missing:
        raise FormatError(path, f"shard set incomplete: {len(missing)} of {total} shards "
                                f"missing, first {os.path.basename(missing[0])}",
                          "copy the missing shards, or download the set again")
    for f in files:  # the set's other shards: inside the named one's folder
        check_input_file(f, directory or os.curdir)
    return files


def group_shards(files) -> dict:
    """{base path: [files]}: shards grouped (and completed) into sets, other files alone."""
    groups = {}
    for f in sorted(files):
        m = SHARD_RE.match(os.path.basename(f))
        base = os.path.join(os.path.dirname(f), m["base"]) if m else f
        groups.setdefault(base, []).append(f)
    for base, members in groups.items():
        if len(members) > 1 or is_shard_name(members[0]):
            groups[base] = expand_shards(members[0])
    return groups


def other_shard_sets(base, targets, side_suffixes=()) -> list:
    """Files an earlier write of `base` left under other names than `targets`, and
    the side files (`<file><suffix>`, such as TFRecord's .idx) of any file of base's
    family but the targets (those the caller decides on)."""
    folder, name = os.path.split(os.path.abspath(str(base)))
    keep = {os.path.basename(t) for t in targets}
    found = []
    for entry in output_entries(folder):  # sorted
        core = next((entry[:-len(s)] for s in side_suffixes
                     if entry.endswith(s) and len(entry) > len(s)), entry)
        m = SHARD_RE.match(core)
        if core not in keep and (core == name or (m and m["base"] == name)):
            found.append(os.path.join(folder, entry))
    return found


class ShardSet:
    """The files of one output: `shards` files named after base and the records each
    holds (bounds)."""

    def __init__(self, base, count, shards=1, suffix_one=False, stream=False):
        self.base = str(base)
        self.count = count
        self.targets = shard_names(self.base, shards, suffix_one)
        self.bounds = shard_bounds(count, shards)
        self.stream = stream  # '-': one stream, nothing beside it to supersede

    def ranges(self) -> list:
        """(target, start, stop) of each shard: its file and records start..stop."""
        return list(zip(self.targets, [0] + self.bounds[:-1], self.bounds))


# --- which files a path given to read() names (TFRecord, ArrayRecord) ---------------

# Words of a file name that say its split (t10k is MNIST's test set).
SPLIT_WORDS = {"train": "train", "test": "test", "t10k": "test", "validation": "validation",
               "valid": "validation", "val": "validation"}
# Splits are listed in this order, then any others by name (every reader, one rule).
SPLIT_ORDER = ("train", "validation", "test")


def _without(name, extensions):
    for ext in extensions:
        if name.lower().endswith(ext):
            return name[:-len(ext)]
    return name


def split_name_of(base, extensions=(), default="train"):
    """train/test/validation from the words of a file name (t10k: test), else default."""
    name = _without(os.path.basename(str(base)), extensions).lower()
    for word in re.split(r"[-_.]", name)[::-1]:
        if word in SPLIT_WORDS:
            return SPLIT_WORDS[word]
    return default


def in_split_order(names) -> list:
    """Split names as mnistconv lists splits: SPLIT_ORDER, then any others by name."""
    rank = {name: i for i, name in enumerate(SPLIT_ORDER)}
    return sorted(names, key=lambda s: (rank.get(s, len(rank)), s))


def _named_groups(groups, extensions, prefix=""):
    """{split: files} of group_shards' groups: each base's split word, else its name less
    prefix and extension (a name taken twice goes by its file name)."""
    named = {}
    for base, files in groups.items():
        own = _without(os.path.basename(base), extensions)
        own = own[len(prefix):] if prefix and own.startswith(prefix) else own
        name = split_name_of(base, extensions, default=own or os.path.basename(base))
        named[name if name not in named else os.path.basename(base)] = files
    return {s: named[s] for s in in_split_order(named)}


def resolve_inputs(path, extensions, matches_name, kind) -> dict:
    """{split name: [files]} for what read() is given: a file, a shard (its set), a
    directory, a glob (grouped by split words) or a name write() was given (its shard
    set, or the <stem>-<split><ext> files beside it). kind names the files in messages."""
    path = str(path)
    if os.path.isdir(path):
        files = input_entries(path, None, lambda n: matches_name(n) and is_data_name(n), "file")
        if not files:
            raise UsageError(path, f"directory holds no {kind} files", "check the path")
        return _named_groups(group_shards(files), extensions)
    if os.path.exists(path):
        check_input_file(path)
        if SHARD_RE.match(os.path.basename(path)):
            return {split_name_of(shard_numbers(path)[0], extensions): expand_shards(path)}
        return {split_name_of(path, extensions): [path]}
    if glob.has_magic(path):
        files = sorted(f for f in glob.glob(path) if os.path.isfile(f) and is_data_name(f))
        if not files:
            raise UsageError(path, "no file matches this pattern", "check the pattern")
        named = {}
        for base, members in group_shards(files).items():
            named.setdefault(split_name_of(base, extensions), []).extend(members)
        return {s: named[s] for s in in_split_order(named)}
    shards = sorted(f for f in glob.glob(glob.escape(path) + "-[0-9][0-9][0-9][0-9][0-9]-of-*")
                    if is_shard_name(f) and is_data_name(f))
    if shards:  # the set written under path
        return {split_name_of(path, extensions): expand_shards(shards[0])}
    directory, name = os.path.split(path)
    stem = _without(name, extensions)
    ext = name[len(stem):]
    siblings = [s for s in glob.glob(os.path.join(glob.escape(directory) or ".",
                                                  glob.escape(stem) + "-*" +
                                                  glob.escape(ext) + "*"))
                if matches_name(s) and is_data_name(s)
                and check_input(s, directory or os.curdir, "any") and os.path.isfile(s)]
    if siblings:
        return _named_groups(group_shards(siblings), extensions, prefix=stem + "-")
    raise NotFound(path, "no such file or directory")
