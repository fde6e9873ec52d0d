"""Shard naming and shard sets, for every format whose output may be cut into files.

A shard set is `<base>-00000-of-00004` ... `<base>-00003-of-00004`: TensorFlow's and
TFDS' convention (five digits each, the index from 0, the total), records in shard
order. This module knows names and files only, nothing of what a shard holds, so TFRecord,
ArrayRecord, WebDataset tar shards and Parquet shards all use it.

Writing: ShardSet plans the files of one output (`shards=1` is the base name itself,
unless the format wants the suffix even then, as TFDS does) and stages them in a
fileio.StagedOutput. What counts as an existing output is the whole family of the base
name: the unsharded file and shard sets of every size (a glob over `base-*` would read
an old 4-shard set with a new 2-shard one). Without force any of them is refused; with
force they are removed when the new set is committed, all under StagedOutput's lock.

Reading: a name read from disk says how many files to look for, so its counts are
checked (1..limits.MAX_SHARDS, index below the total) before anything is globbed, and a
set with a missing shard is an error, never a shorter dataset. Hidden files and staging
leftovers are never shards.
"""

import glob
import os
import re

from .errors import FormatError, NotFound, UsageError
from .fileio import STAGING_MARK, check_input, check_input_file, input_entries, \
    output_entries
from .limits import MAX_SHARDS, count_in_range, printable

SHARD_RE = re.compile(r"^(?P<base>.+)-(?P<index>\d{5})-of-(?P<total>\d{5})$")


def check_shard_count(value, option="--shards") -> int:
    """A requested number of shards, 1..limits.MAX_SHARDS, else a usage error.

        check_shard_count(4)  # 4
    """
    return count_in_range(value, option, MAX_SHARDS)


def shard_names(base, shards, suffix_one=False) -> list:
    """The file names of `shards` shards of base; one shard is base itself unless
    suffix_one (TFDS names even a single shard -00000-of-00001).

        shard_names("m.tfrecord", 2)  # ['m.tfrecord-00000-of-00002', 'm.tfrecord-00001-of-00002']
    """
    if shards == 1 and not suffix_one:
        return [str(base)]
    return [f"{base}-{i:05d}-of-{shards:05d}" for i in range(shards)]


def shard_bounds(count, shards) -> list:
    """Where each shard ends, in records: count split as evenly as integers allow, the
    same on every run (shard i holds records bounds[i-1]..bounds[i]).

        shard_bounds(10, 3)  # [3, 6, 10]
    """
    return [count * (i + 1) // shards for i in range(shards)]


def is_shard_name(name) -> bool:
    """The name (not the path) of a file follows the -00000-of-00004 convention."""
    return SHARD_RE.match(os.path.basename(str(name))) is not None


def is_data_name(name) -> bool:
    """Not a staging leftover (a write killed outright leaves `.<name>.mnistconv-tmp-*`
    beside its target) nor any other hidden file: those are never shards or splits."""
    name = os.path.basename(str(name))
    return not name.startswith(".") and STAGING_MARK not in name


def data_files_in(directory, matches_name) -> list:
    """The data files of a directory whose names matches_name accepts (staging and
    hidden names left out), sorted by name: what a directory given as input holds."""
    return input_entries(directory, None, lambda n: matches_name(n) and is_data_name(n),
                         "file")


def sniff_files(path, matches_name, has_signature) -> bool:
    """Content says this format: has_signature(path) for a file; for a directory, one of
    its data files (names matches_name accepts) has it. How sharded formats sniff."""
    path = str(path)
    if not os.path.isdir(path):
        return has_signature(path)
    return any(has_signature(p) for p in input_entries(
        path, None, lambda n: matches_name(n) and is_data_name(n)))


def shard_numbers(path):
    """(base, index, total) of a shard's name, checked: 0 shards, an index past the
    total or more than MAX_SHARDS is a FormatError naming the file, not a loop or an
    empty set.

        shard_numbers("d/m-00001-of-00004")  # ('m', 1, 4)
    """
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
    """All files of the shard set that `path` (one of its shards) belongs to, in order,
    checking that none is missing."""
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
    """{base path: [files in order]}: shards grouped (and completed) into their sets,
    any other file a group of its own."""
    groups = {}
    for f in sorted(files):
        m = SHARD_RE.match(os.path.basename(f))
        base = os.path.join(os.path.dirname(f), m["base"]) if m else f
        groups.setdefault(base, []).append(f)
    for base, members in groups.items():
        if len(members) > 1 or is_shard_name(members[0]):
            groups[base] = expand_shards(members[0])
    return groups


def find_shard_set(base):
    """The files of a shard set written under base (`base-00000-of-N`...), or None."""
    found = sorted(f for f in glob.glob(glob.escape(str(base)) +
                                        "-[0-9][0-9][0-9][0-9][0-9]-of-*")
                   if is_shard_name(f) and is_data_name(f))
    return expand_shards(found[0]) if found else None


def other_shard_sets(base, targets) -> list:
    """Files beside `base` that an earlier write of it left under other names than
    `targets`: the unsharded file and shard sets of other sizes."""
    folder, name = os.path.split(os.path.abspath(str(base)))
    entries = output_entries(folder)
    keep = {os.path.basename(t) for t in targets}
    found = []
    for entry in sorted(entries):
        m = SHARD_RE.match(entry)
        if entry not in keep and (entry == name or (m and m["base"] == name)):
            found.append(os.path.join(folder, entry))
    return found


class ShardSet:
    """The files of one output: `shards` files named after base, and the records each
    holds. stage() registers them with a StagedOutput and supersedes the base's other
    shard sets, so the whole family changes at once on commit.

        with StagedOutput(force) as staged:
            out = ShardSet("m.tfrecord", count=60000, shards=4)
            for target, tmp in zip(out.targets, out.stage(staged)):
                ...  # write shard `target` at the temporary path tmp
    """

    def __init__(self, base, count, shards=1, suffix_one=False, stream=False):
        self.base = str(base)
        self.count = count
        self.targets = shard_names(self.base, shards, suffix_one)
        self.bounds = shard_bounds(count, shards)
        self.stream = stream  # '-': one stream, nothing beside it to supersede

    def stage(self, staged) -> list:
        """The temporary paths to write the shards at (refusing existing targets
        without force), with every other shard set of the base superseded."""
        paths = self.stage_files(staged)
        self.supersede_others(staged)
        return paths

    def stage_files(self, staged) -> list:
        """The temporary paths to write the shards at; existing targets are refused
        without force."""
        return [staged.file(t) for t in self.targets]

    def supersede_others(self, staged):
        """Mark the base's other shard sets (and its unsharded file) for removal on
        commit; refused without force. (Several outputs stage all their files first,
        then supersede: the first conflict reported is then a target's own name.)"""
        if not self.stream:
            for stale in other_shard_sets(self.base, self.targets):
                staged.supersede(stale)


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
    """train/test/validation from the words of a file name (t10k -> test), else the
    default.

        split_name_of("data/mnist-t10k.tfrecord", (".tfrecord",))   # 'test'
    """
    name = _without(os.path.basename(str(base)), extensions).lower()
    for word in re.split(r"[-_.]", name)[::-1]:
        if word in SPLIT_WORDS:
            return SPLIT_WORDS[word]
    return default


def in_split_order(names) -> list:
    """Split names as mnistconv lists splits: SPLIT_ORDER, then any others by name.

        in_split_order(["test", "extra", "train"])   # ['train', 'test', 'extra']
    """
    rank = {name: i for i, name in enumerate(SPLIT_ORDER)}
    return sorted(names, key=lambda s: (rank.get(s, len(rank)), s))


def _named_groups(groups, extensions, prefix=""):
    """{split: files} of group_shards' groups: each base's split word, else its own
    name (without the prefix write() gave it and the extension); a name taken twice
    goes by its file name."""
    named = {}
    for base, files in groups.items():
        own = _without(os.path.basename(base), extensions)
        own = own[len(prefix):] if prefix and own.startswith(prefix) else own
        name = split_name_of(base, extensions, default=own or os.path.basename(base))
        named[name if name not in named else os.path.basename(base)] = files
    return {s: named[s] for s in in_split_order(named)}


def resolve_inputs(path, extensions, matches_name, kind) -> dict:
    """{split name: [files]} for what read() is given: a file, a shard (its whole set),
    a directory (its data files whose names matches_name accepts), a glob (its files
    grouped by the split word in their names, train when there is none), or a name
    write() was given (its shard set, or the <stem>-<split><ext> files written beside
    it). kind names the format's files in messages.

        resolve_inputs("out/m.tfrecord", (".tfrecord",), matches_name, ".tfrecord")
        # {'train': ['out/m-train.tfrecord'], 'test': ['out/m-test.tfrecord']}
    """
    path = str(path)
    if os.path.isdir(path):
        files = data_files_in(path, matches_name)
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
    shards = find_shard_set(path)
    if shards:
        return {split_name_of(path, extensions): shards}
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
