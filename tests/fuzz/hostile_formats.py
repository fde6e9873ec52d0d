"""Hostile names, label values and compression ratios for the readers added after the
first four (hostile.py covers IDX, npz, GDMNIST1, TFRecord): TFDS, ArrayRecord, Parquet,
WebDataset, ImageFolder, Caffe LMDB and HDF5, KMNIST, Quick, Draw!. Same rules as
hostile.py: plain functions of a random.Random, the input written under work/in, a Case
returned. Where a family does not apply to a reader, FAMILIES (hostile.py) says why.
"""

import json
import os
import shutil
import struct
import zlib

try:
    from . import seeds as seedlib
    from .hostile import (LABEL_VALUES, MIB, Case, _field, _is_safe, bomb_mib,
                          deflate_parts, frame, hostile_name, label_feature, records)
except ImportError:
    import seeds as seedlib
    from hostile import (LABEL_VALUES, MIB, Case, _field, _is_safe, bomb_mib,
                         deflate_parts, frame, hostile_name, label_feature, records)


def refused(split, given=False):
    """The exit codes for a split name read from a file or folder name: 1 when it is not
    safe, unless the reader never sees it (a hidden name, in a directory it lists)."""
    return None if _is_safe(split) or (split.startswith(".") and not given) else (1,)


def _copy(rng, reader, work, keep=lambda seed: True):
    """A copy of one of the reader's seeds under work/in; its path."""
    seed = rng.choice([s for s in seedlib.seeds(reader) if keep(s)])
    return str(seedlib.copy_seed(seed, os.path.join(work, "in")))


def _find(root, name):
    """The folder under root holding a file called name."""
    for folder, _, files in os.walk(root):
        if name in files:
            return folder
    raise AssertionError(f"no {name} under {root}")


def _rename_all(folder, old, new):
    """Rename every file under folder whose name holds `old` (as a whole word between
    '-', '.', '_' or '/'), replacing it by `new`; returns the new names."""
    done = []
    for path in sorted(seedlib.files_of(folder)):
        name = path.name
        for a, b in (("-", "."), ("-", "-"), ("", "-"), ("", "."), ("_", "_"), ("-", "")):
            word = f"{a}{old}{b}"
            if word in name and (name.startswith(word) if a == "" else True):
                target = path.with_name(name.replace(word, f"{a}{new}{b}", 1))
                path.rename(target)
                done.append(target.name)
                break
    return done


# --- PNG bombs -----------------------------------------------------------------------

def _chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + \
        struct.pack(">I", zlib.crc32(data, zlib.crc32(kind)))


def png_bomb(rng):
    """(PNG bytes, description): a few KB that inflate far beyond a 28 x 28 image.
    honest: a grey image of the size it declares, all zeros; small-header: IHDR says
    28 x 28, the IDAT stream goes on for MiBs; short: a huge IHDR, little data; wide:
    over mnistconv's pixel limit; many: thousands of tiny IDAT chunks."""
    how = rng.choice(["honest", "honest", "small-header", "short", "wide", "rgb"])
    mib = bomb_mib(rng)
    colour = 0
    if how == "honest":
        side = rng.choice([1024, 4096, 8192, 9000, 12000, 16384])
        w = h = side
        parts = [h * (w + 1)]
    elif how == "small-header":
        w = h = 28
        parts = [28 * 29, mib * MIB]
    elif how == "short":
        w, h = rng.choice([(16384, 16384), (2 ** 31 - 1, 1), (1, 2 ** 31 - 1), (60000, 60000)])
        parts = [mib * MIB]
    elif how == "wide":
        w, h = rng.choice([(16385, 16384), (65535, 65535), (100000, 1)])
        parts = [min(mib, 16) * MIB]
    else:
        colour, side = 2, rng.choice([28, 2048, 6000])
        w = h = side
        parts = [h * (3 * w + 1)] if side > 28 else [28 * 85, mib * MIB]
    stream, _, adler, _ = deflate_parts(parts)
    idat = b"\x78\xda" + stream + struct.pack(">I", adler)
    chunks = [idat]
    if rng.random() < 0.2:
        step = max(1, len(idat) // rng.choice([2, 100, 5000]))
        chunks = [idat[i:i + step] for i in range(0, len(idat), step)]
    data = b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, colour,
                                                              0, 0, 0))
    data += b"".join(_chunk(b"IDAT", c) for c in chunks) + _chunk(b"IEND", b"")
    return data, f"PNG bomb {how} {w}x{h} colour {colour}, {len(data)} bytes, " \
                 f"{sum(p if isinstance(p, int) else len(p) for p in parts) >> 20} MiB"


# --- TF Examples (TFDS, ArrayRecord) -------------------------------------------------

def _example_class():
    from mnistconv.codecs.example import example_class
    return example_class()


def _with_feature(data, key, value):
    """An Example's bytes with feature `key` replaced by the serialized Feature value."""
    example = _example_class().FromString(data)
    feature = example.features.feature
    if key in feature:
        del feature[key]
    entry = _field(1, key.encode()) + _field(2, value)
    return example.SerializeToString(deterministic=True) + _field(1, _field(1, entry))


def _hostile_examples(rng, data_records, family):
    """Records with hostile labels (family labels) or PNG bombs (ratio): the first
    always, the others now and then."""
    out, what = [], []
    for k, data in enumerate(data_records):
        if k == 0 or rng.random() < 0.3:
            if family == "labels":
                value, told = label_feature(rng)
                data = _with_feature(data, "label", value)
            else:
                png, told = png_bomb(rng)
                data = _with_feature(data, "image", _field(1, _field(1, png)))
            what.append(f"record {k}: {told}")
        out.append(data)
    return out, what


def _array_records(path):
    from mnistconv.codecs.spool import array_record_module
    reader = array_record_module().ArrayRecordReader(str(path))
    try:
        return [bytes(r) for r in reader.read_all()]
    finally:
        reader.close()


def _write_array_records(path, data_records, options="group_size:1"):
    from mnistconv.codecs.spool import array_record_module
    writer = array_record_module().ArrayRecordWriter(str(path), options)
    for r in data_records:
        writer.write(r)
    writer.close()


def _examples_tfds(rng, work, family):
    root = _copy(rng, "tfds", work)
    folder = _find(root, "dataset_info.json")
    shard = rng.choice(sorted(p for p in os.listdir(folder) if "-00000-of-" in p))
    path = os.path.join(folder, shard)
    if ".array_record-" in shard:
        new, what = _hostile_examples(rng, _array_records(path), family)
        os.remove(path)
        _write_array_records(path, new)
    else:
        with open(path, "rb") as f:
            new, what = _hostile_examples(rng, records(f.read()), family)
        with open(path, "wb") as f:
            f.write(b"".join(frame(r) for r in new))
    # numBytes is checked against the records: keep it true, so the records are read.
    info_path = os.path.join(folder, "dataset_info.json")
    with open(info_path) as f:
        info = json.load(f)
    split = shard.split("-")[1].split(".")[0]
    for entry in info["splits"]:
        if entry["name"] == split and rng.random() < 0.8:
            entry.pop("numBytes", None)
    with open(info_path, "w") as f:
        json.dump(info, f)
    return Case(rng.choice([root, folder]), f"TFDS {shard}: {'; '.join(what)}")


def _examples_arrayrecord(rng, work, family):
    root = _copy(rng, "arrayrecord", work)
    files = [str(p) for p in seedlib.files_of(root)]
    path = rng.choice(files)
    new, what = _hostile_examples(rng, _array_records(path), family)
    os.remove(path)
    _write_array_records(path, new, rng.choice(["group_size:1", "group_size:1,zstd:1",
                                                "group_size:4,uncompressed",
                                                "group_size:1,brotli:1"]))
    return Case(rng.choice([root, path]), f"ArrayRecord {os.path.basename(path)}: "
                                          f"{'; '.join(what)}")


def labels_tfds(rng, work, top):
    return _examples_tfds(rng, work, "labels")


def ratio_tfds(rng, work, top):
    return _examples_tfds(rng, work, "ratio")


def labels_arrayrecord(rng, work, top):
    return _examples_arrayrecord(rng, work, "labels")


def ratio_arrayrecord(rng, work, top):
    return _examples_arrayrecord(rng, work, "ratio")


def names_tfds(rng, work, top):
    root = _copy(rng, "tfds", work)
    folder = _find(root, "dataset_info.json")
    info_path = os.path.join(folder, "dataset_info.json")
    with open(info_path) as f:
        info = json.load(f)
    how = rng.choice(["split", "split", "template", "dataset", "feature", "classes",
                      "folder"])
    evil = hostile_name(rng, top)
    expect = None
    entry = rng.choice(info["splits"])
    if how == "split":
        old, entry["name"] = entry["name"], evil
        usable = "/" not in evil and "\0" not in evil and len(os.fsencode(evil)) < 200
        if usable and evil not in ("", ".", ".."):
            _rename_all(folder, old, evil)
        expect = None if _is_safe(evil) else (1,)
    elif how == "template":
        outside = os.path.join(work, "in", "outside")
        os.makedirs(outside)
        for p in os.listdir(folder):
            if "-00000-of-" in p:
                shutil.copy(os.path.join(folder, p), outside)
        entry["filepathTemplate"] = rng.choice([
            "../outside/{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}",
            "../../../outside/{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}",
            outside + "/{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}",
            "{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}/..", evil,
            "{SPLIT}/../../outside/{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}"])
        evil = entry["filepathTemplate"]
        expect = (1,)
    elif how == "dataset":
        old, info["name"] = info["name"], evil
        if "/" not in evil and "\0" not in evil and evil not in ("", ".", "..") and \
                len(os.fsencode(evil)) < 200 and rng.random() < 0.7:
            for p in os.listdir(folder):
                if p.startswith(old + "-"):
                    os.rename(os.path.join(folder, p),
                              os.path.join(folder, evil + p[len(old):]))
    elif how == "feature":
        with open(os.path.join(folder, "features.json")) as f:
            features = json.load(f)
        inner = features["featuresDict"]["features"]
        key = rng.choice(sorted(inner))
        inner[evil] = inner.pop(key)
        with open(os.path.join(folder, "features.json"), "w") as f:
            json.dump(features, f)
        evil = f"{key} -> {evil!r}"
    elif how == "classes":
        names = [rng.choice([hostile_name(rng, top), str(i)]) for i in range(10)]
        with open(os.path.join(folder, "label.labels.txt"), "w", encoding="utf-8",
                  errors="surrogateescape") as f:
            f.write("\n".join(names).replace("\0", rng.choice(["", "\0"])) + "\n")
        evil = names
    else:  # the dataset or version folder itself renamed
        name = hostile_name(rng, top, filesystem=True)
        target = os.path.join(os.path.dirname(folder), name)
        if not os.path.exists(target):
            os.rename(folder, target)
            folder = target
        evil = name
    if how != "folder":
        with open(info_path, "w") as f:
            json.dump(info, f)
    return Case(rng.choice([root, folder]), f"TFDS {how} = {evil!r}", expect)


def names_arrayrecord(rng, work, top):
    root = _copy(rng, "arrayrecord", work)
    evil = hostile_name(rng, top, filesystem=True)
    pattern = rng.choice(["{e}.array_record", "data-{e}.array_record", "{e}",
                          "{e}-{i:05d}-of-{n:05d}", "{e}-{i:05d}-of-{n:05d}.array_record",
                          "data-{e}-{i:05d}-of-{n:05d}.array_record"])
    files = seedlib.files_of(root)
    names = []
    for i, p in enumerate(files):
        name = pattern.format(e=evil, i=i, n=len(files))
        if name in names or (root + "/" + name) in map(str, files):
            name = f"{i}{name}"
        names.append(name)
        p.rename(p.with_name(name))
    given = rng.choice(["dir", "file", "base"])
    path = root if given == "dir" else os.path.join(root, names[0]) if given == "file" \
        else os.path.join(root, evil)
    return Case(path, f"ArrayRecord files {names!r}, given as the {given}")


# --- Parquet ---------------------------------------------------------------------------

def _parquet_files(root):
    return [str(p) for p in seedlib.files_of(root) if p.name.endswith(".parquet")]


def names_parquet(rng, work, top):
    # The README's config, split names and data_files are not read (the splits come
    # from the file and folder names, as datasets' own data-files resolution does
    # without a card); the card is still made hostile, so that a reader that starts
    # following it is fuzzed.
    root = _copy(rng, "parquet", work)
    evil = hostile_name(rng, top, filesystem=True)
    how = rng.choice(["shard", "file", "config", "card", "numbered"])
    files = _parquet_files(root)
    victim = rng.choice(files)
    split = os.path.basename(victim).split("-")[0]
    expect = None
    path = root
    if how == "shard":
        for f in files:
            if os.path.basename(f).startswith(split + "-"):
                os.rename(f, os.path.join(os.path.dirname(f), evil +
                                          os.path.basename(f)[len(split):]))
        expect = refused(evil)
    elif how == "file":
        target = os.path.join(os.path.dirname(victim), evil + ".parquet")
        os.rename(victim, target)
        if rng.random() < 0.5:
            path = target
        expect = refused(evil, path == target)
    elif how == "config":
        target = os.path.join(root, evil)
        if not os.path.exists(target):
            os.rename(os.path.dirname(victim), target)
    elif how == "numbered":  # <split>/0000.parquet folders
        folder = os.path.join(os.path.dirname(victim), evil)
        if not os.path.exists(folder):
            os.makedirs(folder)
            os.rename(victim, os.path.join(folder, "0000.parquet"))
            path = rng.choice([root, os.path.join(folder, "0000.parquet")])
            expect = refused(evil, path != root)
    else:
        card = os.path.join(root, "README.md")
        raw = hostile_name(rng, top)
        text = open(card, encoding="utf-8").read()
        for word in rng.sample(['"train"', '"default"', '"data/train-*"', '"test"'], 2):
            text = text.replace(word, json.dumps(raw))
        with open(card, "w", encoding="utf-8", errors="surrogateescape") as f:
            f.write(text)
        evil = raw
    return Case(path, f"Parquet {how} = {evil!r}", expect)


def _rewrite_parquet(path, table, rng):
    import pyarrow.parquet as pq
    old = pq.read_schema(path)
    table = table.replace_schema_metadata(old.metadata) if rng.random() < 0.7 else table
    pq.write_table(table, path, compression=rng.choice(["none", "zstd", "gzip",
                                                        "snappy"]))


def labels_parquet(rng, work, top):
    import pyarrow as pa
    import pyarrow.parquet as pq
    root = _copy(rng, "parquet", work)
    path = rng.choice(_parquet_files(root))
    table = pq.read_table(path)
    n = table.num_rows
    how = rng.choice(["int64", "int64", "uint64", "float", "nulls", "int8", "string",
                      "list"])
    values = [rng.choice([v for v in LABEL_VALUES if isinstance(v, int)])
              if rng.random() < 0.6 else rng.randrange(10) for _ in range(n)]
    if how in ("int64", "int8"):
        bits = 64 if how == "int64" else 8
        values = [((v + (1 << (bits - 1))) % (1 << bits)) - (1 << (bits - 1)) for v in values]
        column = pa.array(values, pa.int64() if bits == 64 else pa.int8())
    elif how == "uint64":
        column = pa.array([v % (1 << 64) for v in values], pa.uint64())
    elif how == "float":
        values = [rng.choice(LABEL_VALUES) for _ in range(n)]
        column = pa.array([float(v) for v in values], pa.float64())
    elif how == "nulls":
        values = [None if rng.random() < 0.5 else rng.randrange(10) for _ in range(n)]
        values[0] = None
        column = pa.array(values, pa.int64())
    elif how == "string":
        values = [rng.choice(["nan", "1e99", "-1", "9" * 20, "3"]) for _ in range(n)]
        column = pa.array(values, pa.string())
    else:
        values = [[rng.randrange(10)] * rng.choice([0, 1, 2]) for _ in range(n)]
        column = pa.array(values, pa.list_(pa.int64()))
    table = table.set_column(table.schema.get_field_index("label"), "label", column)
    _rewrite_parquet(path, table, rng)
    return Case(path if rng.random() < 0.5 else root,
                f"Parquet {os.path.basename(path)} label {how} {values}")


def ratio_parquet(rng, work, top):
    import pyarrow as pa
    import pyarrow.parquet as pq
    root = _copy(rng, "parquet", work)
    path = rng.choice(_parquet_files(root))
    table = pq.read_table(path)
    how = rng.choice(["png", "png", "pages", "long-bytes"])
    if how == "png":
        images = table.column("image").to_pylist()
        what = []
        for k in range(len(images)):
            if k == 0 or rng.random() < 0.3:
                images[k] = {"bytes": png_bomb(rng)[0], "path": None}
                what.append(k)
        column = pa.array(images, table.schema.field("image").type)
        told = f"PNG bombs at rows {what}"
    else:
        # A column of zeros that compresses to almost nothing: the page holds it all
        # (honest), or one image's bytes are megabytes of zeros (what a PNG is not).
        size = min(bomb_mib(rng), 64) * MIB if how == "long-bytes" else 28 * 28
        rows = [{"bytes": bytes(size if k == 0 else 28 * 28), "path": None}
                for k in range(table.num_rows)]
        column = pa.array(rows, table.schema.field("image").type)
        told = f"image bytes of {size:,} zeros in row 0"
    table = table.set_column(table.schema.get_field_index("image"), "image", column)
    _rewrite_parquet(path, table, rng)
    return Case(path if rng.random() < 0.5 else root, f"Parquet {how}: {told}")


# Every family applies to these three: names (split, dataset, feature and class names;
# shard, file and folder names), labels (the Examples' or the label column's values) and
# ratio (PNG bombs in the image bytes; Parquet pages of zeros).
FAMILIES = {
    "names": {"tfds": names_tfds, "arrayrecord": names_arrayrecord,
              "parquet": names_parquet},
    "labels": {"tfds": labels_tfds, "arrayrecord": labels_arrayrecord,
               "parquet": labels_parquet},
    "ratio": {"tfds": ratio_tfds, "arrayrecord": ratio_arrayrecord,
              "parquet": ratio_parquet},
}
