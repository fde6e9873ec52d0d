"""TFDS prepared dataset directories, written and read without TensorFlow.

The layout TFDS itself writes (tfds.builder_from_directory and tfds.load(data_dir=)
read it):
    DIR/<name>/<version>/dataset_info.json    splits, shard lengths, numBytes (info.py)
    DIR/<name>/<version>/features.json        Image (H, W, 1 or 3) uint8 + ClassLabel
    DIR/<name>/<version>/label.labels.txt     class names, one a line
    DIR/<name>/<version>/<name>-<split>.<tfrecord|array_record>-00000-of-0000N
Every record is a tf.train.Example {"image": PNG bytes, "label": int64}, the bytes TFDS
writes (codecs/tfds_encode.py, codecs/tfpng.py), in TFRecord framing (uint64 length,
uint32 masked CRC-32C of the length, data, uint32 masked CRC-32C of the data) or
through the array-record package (group_size:1, TFDS' own setting). The number of
shards is --shards, else the encoded size over --shard-size, else TFDS' rule (64 MiB to
1 GiB a shard: one for MNIST); records are cut into shards as TFDS cuts them: in the
input's order (no key-hash shuffle), with TFDS' rounded bounds (info.tfds_bounds).

Reading takes any image classification dataset with one grey or RGB uint8 Image and
one ClassLabel, checking every claim (shardLengths, numBytes, features.json's shape,
numClasses) before believing it.

    ds = mnistconv.read("data/mnist")
    mnistconv.write(ds, "tfds_data", "tfds")       # tfds_data/mnist/1.0.0/...
    # tfds.builder_from_directory("tfds_data/mnist/1.0.0").as_dataset(split="train")
"""

import glob
import hashlib
import os
from dataclasses import dataclass

import numpy as np

from .. import registry
from ..contract import Counters, ShardTarget, ShardedWrite
from ...errors import CorruptData, FormatError, InTheWay, NoSplits, Truncated, UsageError
from ...io.fileio import check_input_file, check_output_path, exists_error, input_root, \
    is_staging_name, open_input, open_staged, output_entries
from ...workers.parallel import ParallelEncoder, check_workers
from ...model.records import Dataset, OutputFile, WrappedSplit
from ...io.shards import check_shard_count, SHARD_RE
from ...limits import MAX_SHARDS, parse_bytes
from ...codecs import spool as shardwrite, tfds_encode as encode
from . import info as tfds_info

METADATA = ("dataset_info.json", "features.json", "label.labels.txt")
# A PNG's signature, IHDR chunk, one IDAT chunk's framing and IEND: no record is smaller.
_PNG_FIXED = 8 + 25 + 12 + 12
# The Example around the PNG and the label: 96 bounds it for any label and PNG length.
_EXAMPLE_MOST = 96


def parse_size(value, option="--shard-size"):
    """Bytes per shard with a unit (limits.parse_bytes: 256MB, 1GiB), 1 KiB to 1 TiB; a
    bare number is refused (webdataset's --shard-size counts samples)."""
    return parse_bytes(value, option, 1 << 10, 1 << 40)


def shard_count(shards, shard_size, total_bytes, count, split, where):
    """A split's shard count: --shards, else --shard-size bytes each, else TFDS' rule."""
    if shards is not None:
        n = shards
    elif shard_size is not None:
        n = min(MAX_SHARDS, max(1, -(-(total_bytes + 16 * count) // shard_size)))
        n = min(n, max(1, count))
    else:
        n = tfds_info.tfds_shard_count(total_bytes, count)
    if n > count:
        raise UsageError(where, f"--shards {n} but split {split} has {count} examples",
                         "every shard holds one example at least")
    return n


def _record_bounds(shape):
    """(fewest, most) bytes of an H x W (x 3) image's Example (the most: zlib's
    deflateBound)."""
    h, w = shape[:2]
    rows = h * (w * (shape[2] if len(shape) == 3 else 1) + 1)
    deflated = rows + (rows + 7) // 8 + (rows + 63) // 64 + 5 + 6
    return _PNG_FIXED, _PNG_FIXED + deflated + 12 * -(-deflated // 8192) + _EXAMPLE_MOST


@dataclass
class TfdsCounters(Counters):
    """A shard's records, the bytes of their serialized Examples, and 1 (the shard)."""

    num_bytes: int = 0
    shards: int = 0


class TfdsWrite(ShardedWrite):
    """A TFDS directory written shard by shard (mnistconv.formats.contract), the metadata once
    every shard is there. Without --shards the count follows the encoded size: taken
    from the header when the smallest and largest records give the same count (finish()
    checks the real sizes agree); else the split is one target, encoded whole, then cut
    (`cut_later`: written in order only, never planned)."""

    counters = TfdsCounters

    def __init__(self, dataset, path, options):
        o = self.options = options
        self.path = path
        from ...family.identity import resolve
        self.identity = resolve(dataset, path, o)
        # The family's TFDS name only when the bytes proved it (house rule 15).
        self.known = tfds_info.FAMILY_NAMES.get(getattr(self.identity.family, "name", None))
        self.name = tfds_info.check_name(o.name if o.name is not None else
                                         tfds_info.default_name(dataset, self.known, path))
        # (1.0.0 when not given: TFDS needs one; the other formats state none)
        self.version = tfds_info.check_version("1.0.0" if o.version is None else o.version)
        if self.name != self.identity.name:  # TFDS' own name for it
            self.identity = resolve(dataset, path, o, self.identity.family, self.name)
        from ...family.identity import add_note
        add_note(dataset, self.identity)
        if o.shards is not None and o.shard_size is not None:
            raise UsageError(None, "--shards and --shard-size both say how to cut shards",
                             "give one of them")
        self.shards = None if o.shards is None else check_shard_count(o.shards)
        self.shard_size = None if o.shard_size is None else parse_size(o.shard_size)
        check_workers(o.workers)
        if o.file_format == "array_record":
            shardwrite.array_record_module()
        if str(path) == "-":
            raise UsageError("-", "a TFDS directory cannot be written to stdout", "name an output directory")
        if not dataset.splits:
            raise NoSplits(path, "nothing to write: the input has no splits")
        self.target = target = os.path.join(str(path), self.name, self.version)
        check_output_path(target, path)  # a linked name or version folder: refused first
        if os.path.exists(target) and not os.path.isdir(target):
            raise InTheWay(target, "exists and is not a directory")
        self.splits, shapes, self.num_classes = [], set(), 0  # [(split name, split)]
        for split_name, split in dataset.splits.items():
            where = split.header.source or split_name
            tfds_info.check_split_name(split_name, where)
            shapes.add(encode.image_shape(split, "TFDS"))
            if split.header.count == 0:
                raise UsageError(where, f"split {split_name} has no examples", "TFDS splits "
                                        "hold one at least")
            self.num_classes = max(self.num_classes, encode.check_labels(split, "TFDS"))
            if self.shards is not None and self.shards > split.header.count:
                raise UsageError(where, f"--shards {self.shards} but split {split_name} has "
                                        f"{split.header.count} examples",
                                 "every shard holds one example at least")
            self.splits.append((split_name, split))
        # One features.json describes every split: contract.admit saw one image size,
        # and one channel count is left to check.
        if len(shapes) > 1:
            raise UsageError(None, "the splits hold grey and RGB images, TFDS' one "
                                   "features.json Image holds one kind",
                             "write the splits to separate directories")
        self.shape = shapes.pop()
        self.names = tfds_info.class_names(self.known, [s for _, s in self.splits],
                                           self.num_classes)
        self.targets, self.task, self.staged = [], None, None
        self.cut_later = {}  # split name -> (fewest, most) shards its encoding may give
        least, most = _record_bounds(self.shape)
        for split_name, split in self.splits:
            count = split.header.count
            low, high = (self.shards,) * 2 if self.shards else (
                shard_count(None, self.shard_size, b * count, count, split_name, self.path)
                for b in (least, most))
            if low == high:
                self.targets += self.cut(split_name, count, low)
            else:  # one target, its shards named once it is encoded
                self.cut_later[split_name] = (low, high)
                self.targets.append(ShardTarget(split_name, 0, os.path.join(
                    target, f"{self.name}-{split_name}.{o.file_format}"), 0, count))
        self.stale = [os.path.join(target, e) for e in self.stale_names()]

    def check_plannable(self):
        """A plan is cut from the header: the shard count may not follow the encoding."""
        for split_name, (low, high) in self.cut_later.items():
            rule = f"--shard-size {self.options.shard_size}" if self.shard_size else \
                "TFDS' rule (64 MiB to 1 GiB a shard)"
            count = dict(self.splits)[split_name].header.count
            raise UsageError(self.path, f"split {split_name}: {rule} gives {low} to {high} "
                                        f"shards for {count:,} images, depending on how "
                                        "well they compress, so a plan cannot be cut "
                                        "from the header", "give --shards N to plan it")

    def outputs(self):
        """A split cut once encoded has no shard names before."""
        for split_name, (low, high) in self.cut_later.items():
            raise UsageError(self.path, f"split {split_name} gets {low} to {high} shards, "
                                        "depending on how well its images compress: their "
                                        "names are known only once written",
                             "give --shards N to name them")
        return super().outputs()

    def cut(self, split_name, count, n) -> list:
        """The n shard targets of a split of count records, cut as TFDS cuts."""
        bounds = tfds_info.tfds_bounds(count, n)
        return [ShardTarget(split_name, i, os.path.join(
            self.target, tfds_info.shard_name(self.name, split_name,
                                              self.options.file_format, i, n)),
            bounds[i - 1] if i else 0, bounds[i]) for i in range(n)]

    def shards_of(self, split_name) -> list:
        """The split's shard targets."""
        return [t for t in self.targets if t.split == split_name]

    def file_names(self) -> list:
        """The names of the files the write makes in the target directory."""
        return list(METADATA) + [os.path.basename(t.path) for t in self.targets]

    def stale_names(self) -> list:
        """TFDS files of an earlier write in the target that this one does not make
        (other shard counts, splits or file format): removed on commit, with force."""
        keep = set(self.file_names())
        return [e for e in output_entries(self.target) if e not in keep and
                not is_staging_name(e) and (e in METADATA or e.endswith(".labels.txt") or (
                    SHARD_RE.match(e) and (".tfrecord-" in e or ".array_record-" in e)))]

    def shared(self, records):
        """The Examples' ParallelEncoder (its task warmed first)."""
        if self.task is None:
            self.task = encode.ExampleTask(self.num_classes, self.shape)
            self.task.warm()
        return ParallelEncoder([self.task], check_workers(self.options.workers),
                               self.options.processes, int(np.prod(self.shape)),
                               encode.chunk_records(self.shape), total=records)

    def stage(self, staged, target):
        """The shard's staged path (None for a split cut once encoded: its shards are
        staged then). A version folder holding anything is replaced only with force."""
        if self.staged is None and not staged.force and os.path.isdir(self.target) \
                and output_entries(self.target, self.path):
            raise exists_error(self.target)
        self.staged = staged
        return None if target.split in self.cut_later else super().stage(staged, target)

    def place(self, spool, lengths, targets, staged_paths) -> list:
        """The spool's records cut into targets (one split's, from the spool's first)."""
        bounds = [t.stop - targets[0].start for t in targets]
        paths = [t.path for t in targets]
        if self.options.file_format == "tfrecord":
            return shardwrite.tfrecord_shards(spool, lengths, bounds, paths, staged_paths)
        return shardwrite.array_record_shards(spool, lengths, bounds, paths, staged_paths,
                                              "group_size:1")

    def metadata(self, described) -> list:
        """(file name, bytes) of METADATA; described: [(split, numBytes, shard lengths)]."""
        texts = (tfds_info.dataset_info_json(self.name, self.version,
                                             self.options.file_format, described,
                                             self.identity, self.known),
                 tfds_info.features_json(self.shape, self.num_classes),
                 "\n".join(self.names) + "\n")
        return [(name, text.encode("utf-8")) for name, text in zip(METADATA, texts)]

    def write_targets(self, targets, paths):
        """Shards of one split at paths, from one spool of their records (a split cut
        once encoded: its shards, staged then)."""
        from ...model.stream import RangeSplit
        target = targets[0]
        split = dict(self.splits)[target.split]
        start, stop = target.start, targets[-1].stop
        whole = (start, stop) == (0, split.header.count)
        near = paths[target.index] or self.target
        with shardwrite.scratch_folder(os.path.dirname(near),
                                       os.path.basename(target.path)) as scratch:
            with self.session(stop - start) as encoder:
                [(_, lengths, spool)] = shardwrite.spool_splits(
                    [(target.split, split if whole else RangeSplit(split, start, stop),
                      self.task, target.path)], encoder, scratch, self.progress, "tfds")
            if len(lengths) != stop - start and not (whole and target.split in self.cut_later):
                raise FormatError(split.header.source or target.split,
                                  f"yielded {start + len(lengths)} examples, its header "
                                  f"says {split.header.count}", "check the input")
            if target.split in self.cut_later:  # the count follows the encoded size
                shards = self.cut(target.split, len(lengths), shard_count(
                    self.shards, self.shard_size, int(lengths.sum()), len(lengths),
                    target.split, self.path))
                written = self.place(spool, lengths, shards,
                                     [self.staged.file(t.path) for t in shards])
                return {target.path: (written[0] if len(written) == 1 else written,
                                      TfdsCounters(len(lengths), int(lengths.sum()),
                                                   len(written)))}
            written = self.place(spool, lengths, targets, [paths[t.index] for t in targets])
        return {t.path: (f, TfdsCounters(t.stop - t.start, int(
            lengths[t.start - start:t.stop - start].sum()), 1))
            for t, f in zip(targets, written)}

    def stats(self, counters):
        """write()'s stats: records and shards."""
        return {"records": counters.records, "shards": counters.shards}

    def metadata_targets(self):
        """The metadata files finish() writes."""
        return [os.path.join(self.target, name) for name in METADATA]

    def finish(self, recorded, staged):
        """Write the metadata from the recorded shards' counters, checked to agree."""
        described = []
        for split_name, split in self.splits:
            planned = self.shards_of(split_name)
            counters = [recorded[t.path][1] for t in planned]
            lengths = [c.records for c in counters]
            num_bytes = sum(c.num_bytes for c in counters)
            if split_name in self.cut_later:  # cut as encoded, by the rule
                bounds = [0] + tfds_info.tfds_bounds(lengths[0], counters[0].shards)
                described.append((split_name, num_bytes, list(np.diff(bounds).tolist())))
                continue
            real = shard_count(self.shards, self.shard_size, num_bytes, split.header.count,
                               split_name, self.path)
            if lengths != [t.stop - t.start for t in planned] or real != len(planned):
                raise FormatError(self.target, f"split {split_name}: the shards hold "
                                               f"{lengths} records, {num_bytes:,} bytes "
                                               f"({real} shards by the rule), the plan "
                                               f"{len(planned)} shards", "run the "
                                               "conversion again with --force")
            described.append((split_name, num_bytes, lengths))
        files = []
        for file_name, data in self.metadata(described):
            path = os.path.join(self.target, file_name)
            with open_staged(staged.file(path)) as out:
                out.write(data)
            files.append(OutputFile(path, len(data), hashlib.sha256(data).hexdigest()))
        return files


def prepare_write(dataset, path, options) -> TfdsWrite:
    """The sharded write of dataset to path with options (SPEC.options())."""
    return TfdsWrite(dataset, path, options)


class TfdsSplit(WrappedSplit):
    """A split of a TFDS directory: its shards read as TFRecord or ArrayRecord (`inner`),
    the header carrying features.json's class count and label.labels.txt's names."""

    def __init__(self, name, inner, meta):
        names = tuple(meta.class_names or ())
        header = inner.header.with_(num_classes=meta.num_classes, class_names=names,
                                    source=meta.directory)
        super().__init__(inner, header)
        self.name, self.inner = name, inner
        self.tfds_name: str = meta.name


def _info_dirs(path):
    """The folders holding dataset_info.json at path or the nearest level below that has any."""
    for depth in ("", "*", "*/*", "*/*/*"):
        found = [os.path.dirname(f) for f in sorted(glob.glob(
            os.path.join(glob.escape(path), depth, "dataset_info.json")))
            if not any(is_staging_name(p) for p in os.path.relpath(f, path).split(os.sep))]
        if found:
            return found
    return []


def find_directory(path):
    """The <name>/<version> directory under path holding dataset_info.json."""
    path = str(path)
    if os.path.isfile(os.path.join(path, "dataset_info.json")):
        return path
    found = _info_dirs(path)
    if not found:
        raise UsageError(path, "holds no dataset_info.json (not a TFDS dataset directory)",
                         "name a TFDS dataset directory (<name>/<version>/)")
    if len(found) > 1:
        shown = ", ".join(os.path.relpath(f, path) for f in found[:3])
        raise UsageError(path, f"holds {len(found)} TFDS datasets ({shown}"
                               f"{', ...' if len(found) > 3 else ''})",
                         "name one of them, e.g. " + os.path.join(path,
                         os.path.relpath(found[0], path)))
    return found[0]


def _tfrecord_counts(path):
    """(records, bytes of record data) of a TFRecord file, from its length fields."""
    count = data = 0
    with open_input(path) as f:  # confined by read() (check_input_file)
        size = os.fstat(f.fileno()).st_size
        at = 0
        while at < size:
            head = f.read(8)
            if len(head) < 8:
                raise Truncated(path, f"truncated: record {count} (counting from 0) "
                                        f"is cut short at byte {at}")
            n = int.from_bytes(head, "little")
            if at + 16 + n > size:
                raise Truncated(path, f"truncated: record {count} (counting from 0) "
                                        f"claims {n:,} bytes, the file ends "
                                        f"{size - at - 16:,} bytes later")
            f.seek(n + 8, 1)
            at += n + 16
            count += 1
            data += n
    return count, data


def read(path, split_name=None, workers=None) -> Dataset:
    """Read a TFDS prepared directory (DIR, DIR/<name> or DIR/<name>/<version>, with or
    without a config level). workers: threads decoding images.
    """
    root = input_root(path)
    directory = find_directory(path)
    meta = tfds_info.Info(directory, root)
    if (meta.image_key, meta.label_key) != ("image", "label"):
        raise FormatError(os.path.join(directory, "features.json"),
                          f"features {meta.image_key!r} and {meta.label_key!r}", "mnistconv "
                          "reads TFDS image classification records keyed image and label")
    splits, paths = {}, []
    info_path = os.path.join(directory, "dataset_info.json")
    for name, (lengths, num_bytes) in meta.splits.items():
        files = meta.shard_files(name)
        for f in files:
            if not os.path.lexists(f):
                raise FormatError(f, f"missing: dataset_info.json lists {len(files)} "
                                     f"shards for split {name}",
                                  "copy the missing shard, or download the dataset again")
            check_input_file(f, root)
        if meta.file_format == "tfrecord":
            data_bytes = 0
            for f, expected in zip(files, lengths):
                count, data = _tfrecord_counts(f)
                if count != expected:
                    raise CorruptData(f, f"holds {count:,} records, dataset_info.json says "
                                         f"{expected:,} (shardLengths)")
                data_bytes += data
            inner = registry.get("tfrecord").load().TFRecordSplit(name, files, "tfds", "none",
                                                                  workers)
            if num_bytes is not None and num_bytes != data_bytes:
                raise CorruptData(info_path, f"split {name}: numBytes says "
                                             f"{num_bytes:,}, its records hold "
                                             f"{data_bytes:,} bytes")
        else:
            # TFDS' ArrayRecord data files, read by that format's reader (a format
            # reaches another through the registry, never by import).
            reader = registry.get("arrayrecord").load()
            inner = reader.ArrayRecordSplit(name, files, workers=workers, expected=lengths,
                                            claimed_by=info_path)
        shape = tuple(inner.header.shape)
        if shape != tuple(meta.shape):
            said = tuple(meta.shape) + ((1,) if len(meta.shape) == 2 else ())
            raise CorruptData(os.path.join(directory, "features.json"),
                              f"says images are {' x '.join(map(str, said))}, "
                              f"split {name}'s records hold "
                              f"{' x '.join(map(str, shape))}")
        labels = inner.labels()
        if len(labels) and int(labels.max()) >= meta.num_classes:
            raise CorruptData(inner.files[0], f"label {int(labels.max())} is not below "
                                              f"numClasses {meta.num_classes} "
                                              "(features.json)")
        splits[name] = TfdsSplit(name, inner, meta)
        paths += files
    return Dataset("tfds", splits, paths)


def sniff(path) -> bool:
    """A directory holding dataset_info.json and features.json, here or up to three
    levels below (DIR/<name>/<config>/<version>)."""
    path = str(path)
    return os.path.isdir(path) and any(os.path.isfile(os.path.join(d, "features.json"))
                                       for d in _info_dirs(path))


def matches_name(path) -> bool:
    """TFDS directories are found by content only."""
    return False
