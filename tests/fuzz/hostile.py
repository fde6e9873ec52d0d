"""Hostile inputs for the long pass, built from the seeds: names, label values and
compression ratios. Plain functions of a random.Random, so a case is reproduced from
(reader, family, index) alone (see worker.py).

- names: npz member names, browser-pack manifest ids and file paths, TFRecord shard and
  file names, IDX and GDMNIST1 file names holding path separators, '..', absolute paths
  (inside the case's own `top`), NUL, newlines, control and non-UTF-8 characters and very
  long names. A split name that reaches the reader intact and is not a safe name
  (limits.is_safe_name) must be refused with exit 1.
- labels: huge, negative, NaN, inf, 2^31-1, 10^8, 2^63-1, 2^64-1 as int64, float64,
  uint64 and the other element types each format can hold; one-hot rows of 10^5 to 10^7.
- ratio: gzip/zlib/deflate streams a few KB long that expand to up to 256 MiB: honest
  headers with that much data, small headers followed by it, huge headers with too
  little, concatenated gzip members.

Each builder writes the input under work/in and returns a Case: the path to give the
command line, what was done, and (rarely) the exit codes the run must end with.
"""

import gzip
import io
import os
import struct
import zipfile
import zlib
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

try:
    from . import seeds as seedlib
    from .structure import container, wrap
except ImportError:
    import seeds as seedlib
    from structure import container, wrap

MIB = 1 << 20


@dataclass
class Case:
    path: str
    what: str
    expect_code: tuple = None
    extra_args: list = field(default_factory=list)
    commands: tuple = None  # restrict the commands tried (None: all)


# --- names -----------------------------------------------------------------------------

TRAVERSAL = ["..", "../evil", "../../evil", "../../../../../../evil", "a/../../evil",
             "evil/../../../x", "./evil", "evil/", "/", "a/b", "train/../../evil",
             "..\\..\\evil", "C:\\evil", "C:evil", "\\\\server\\share\\evil"]
WEIRD = [".", "", " ", "-rf", "--help", ".hidden", "~", "$HOME", "*", "?", "[a", "con",
         "NUL", "aux.bin", "train\n", "ev\nil", "\n", "ev\ril", "ev\til", "\x1b[31mred",
         "\u202eniart", "\u00e9", "\u65e5\u672c", "\x7f", "train ", " train", "%2e%2e",
         "train-00000-of-00001", "x_train", "train.bin", "test.tfrecord", "ev\x00il",
         "\x00", "train\x00../../evil", "ev\udcffil", "\udcfe\udcff"]
LONG = [64, 65, 200, 240, 255, 256, 1000, 4096]


def hostile_name(rng, top, filesystem=False):
    """A name for a split, member or file. filesystem: one that can be a file name (no
    '/', no NUL, at most 255 bytes)."""
    kind = rng.random()
    if kind < 0.35:
        name = rng.choice(TRAVERSAL)
    elif kind < 0.75:
        name = rng.choice(WEIRD)
    elif kind < 0.9:
        name = rng.choice("xé\n.") * rng.choice(LONG)
    else:
        name = rng.choice([f"{top}/abs-evil", f"{top}/abs-dir/evil", f"{top}/../abs-evil"])
    if rng.random() < 0.2:
        name = rng.choice(["train", "test", "data"]) + rng.choice(["", "-", "_", "/"]) + name
    if filesystem:
        name = name.replace("/", rng.choice(["", "_", "\\", ".."])).replace("\0", "")
        while len(os.fsencode(name)) > 200:
            name = name[:len(name) // 2]
        if name in ("", ".", ".."):
            name = "x" + name
    return name


def _encoded(name):
    return name.encode("utf-8", "surrogateescape")


def _is_safe(name):
    try:
        from mnistconv.limits import is_safe_name
    except ImportError:  # limits.py not there yet: the rule it documents
        import re
        return bool(re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,63}", name)) and \
            ".." not in name
    return is_safe_name(name)


def patch_zip_names(data, names):
    """Replace member names (placeholders of the same byte length) in both the local
    headers and the central directory; zipfile itself refuses NUL and rewrites '\\'."""
    data = bytearray(data)
    with zipfile.ZipFile(io.BytesIO(bytes(data))) as z:
        infos = z.infolist()
    eocd = data.rfind(b"PK\x05\x06")
    (cd,) = struct.unpack("<I", data[eocd + 16:eocd + 20])
    for info in infos:
        new = names.get(info.filename)
        if new is None:
            continue
        h = info.header_offset
        data[h + 30:h + 30 + len(new)] = new
    pos = cd
    while data[pos:pos + 4] == b"PK\x01\x02":
        n, m, c = struct.unpack("<HHH", data[pos + 28:pos + 34])
        old = bytes(data[pos + 46:pos + 46 + n]).decode("cp437")
        if old in names:
            data[pos + 46:pos + 46 + n] = names[old]
        pos += 46 + n + m + c
    return bytes(data)


def _npz_members(path):
    with zipfile.ZipFile(path) as z:
        return [(i.filename, z.read(i), i.compress_type) for i in z.infolist()]


def _zip(members, placeholders=None):
    """members: [(name, bytes, compress_type)]; names given as bytes are written via
    same-length placeholders and patched in."""
    out = io.BytesIO()
    patch = {}
    import warnings
    with zipfile.ZipFile(out, "w") as z, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for k, (name, content, compress) in enumerate(members):
            if isinstance(name, bytes):
                stand_in = (chr(ord("A") + k % 26) * len(name)) if name else ""
                stand_in = stand_in[:len(name)]
                patch[stand_in] = name
                name = stand_in
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = compress
            z.writestr(info, content)
    data = out.getvalue()
    return patch_zip_names(data, patch) if patch else data


def names_npz(rng, work, top):
    seed = rng.choice(seedlib.seeds("npz"))
    members = _npz_members(seed)
    evil = hostile_name(rng, top)
    how = rng.choice(["rename", "rename", "directory", "extra", "duplicate"])
    expect = None
    if how == "rename":
        splits = sorted({n[2:-4] for n, _, _ in members if n.startswith("x_")})
        s = rng.choice(splits)
        members = [((n[:2] + "").encode() + _encoded(evil) + b".npy"
                    if n in (f"x_{s}.npy", f"y_{s}.npy") else n, c, t)
                   for n, c, t in members]
        if "\0" not in evil and not _is_safe(evil) and evil.isascii():
            expect = (1,)
        what = f"npz split {s!r} renamed to {evil!r}"
    elif how == "directory":
        members = [(_encoded(evil) + b"/" + n.encode(), c, t) for n, c, t in members]
        what = f"npz members moved under {evil!r}/"
    elif how == "extra":
        name, content, t = rng.choice(members)
        members.append((_encoded(evil) + rng.choice([b".npy", b"/x_train.npy", b""]),
                        content, t))
        what = f"npz extra member {evil!r}"
    else:
        members.append(rng.choice(members))
        what = "npz member duplicated"
    target = os.path.join(work, "in", "case.npz")
    with open(target, "wb") as f:
        f.write(_zip(members))
    return Case(target, what, expect)


def _gdmnist_files():
    """The generated dataset's GDMNIST1 files: {split: bytes}."""
    for seed in seedlib.seeds("gdmnist"):
        if os.path.isdir(seed):
            files = seedlib.files_of(seed)
            if all(p.name.endswith(".bin") for p in files):
                return {p.name[:-4]: p.read_bytes() for p in files}
    raise AssertionError("no GDMNIST1 directory seed")


def names_gdmnist(rng, work, top):
    files = _gdmnist_files()
    pack = os.path.join(work, "in", "pack")
    os.makedirs(pack)
    how = rng.choice(["id", "file", "file", "gzip_file", "scan"])
    evil = hostile_name(rng, top, filesystem=(how == "scan"))
    if how == "scan":  # a directory of *.bin files named after their split
        for k, (split, data) in enumerate(files.items()):
            name = (evil if k == 0 else split) + ".bin"
            with open(os.path.join(pack, name), "wb") as f:
                f.write(data)
        return Case(pack, f"GDMNIST1 directory with a file named {evil + '.bin'!r}")
    outside = os.path.join(work, "in", "outside.bin")
    with open(outside, "wb") as f:
        f.write(files["train"])
    entries = {}
    for split, data in files.items():
        with open(os.path.join(pack, split + ".bin"), "wb") as f:
            f.write(data)
        count = struct.unpack("<I", data[8:12])[0]
        entries[split] = {"id": split, "file": split + ".bin", "count": count,
                          "bytes": len(data), "optional": False}
    victim = rng.choice(sorted(entries))
    expect = None
    if how == "id":
        entries[victim]["id"] = evil
        if not _is_safe(evil):
            expect = (1,)
    else:
        value = rng.choice([evil, "../outside.bin", outside, "../in/outside.bin",
                            f"{victim}.bin/../{victim}.bin", f"./{victim}.bin",
                            f"{victim}.bin\0", "../../../../../../etc/passwd"])
        entries[victim][how] = value
        if how == "file":
            entries[victim].pop("gzip_file", None)
        # A file name is not a split name ('train.bin.gz' is fine, so is 'é.bin', and so
        # is 'a/b', a normalised path inside the pack), but one that leaves the pack
        # directory, or is not a plain normalised relative name, is never followed (an
        # empty name is no file: the entry is read without it).
        parts = value.split("/")
        if value and (value.startswith("/") or any(p in ("", ".", "..") for p in parts)) \
                or "\\" in value or "\0" in value:
            expect = (1,)
        evil = value
    manifest = {"asset_version": "browser-v1", "schema_version": 1, "splits": entries}
    import json
    with open(os.path.join(pack, "manifest.json"), "w") as f:
        json.dump(manifest, f)
    return Case(pack, f"pack manifest: {victim} {how} = {evil!r}", expect,
                commands=None)


def names_tfrecord(rng, work, top):
    seed = rng.choice([s for s in seedlib.seeds("tfrecord") if "-00000-of-" not in
                       " ".join(map(str, seedlib.files_of(s)))])
    files = seedlib.files_of(seed)
    data = [p.read_bytes() for p in files]
    evil = hostile_name(rng, top, filesystem=True)
    folder = os.path.join(work, "in", "shards")
    os.makedirs(folder)
    pattern = rng.choice(["{e}.tfrecord", "{e}-{i:05d}-of-{n:05d}", "data-{e}.tfrecord",
                          "{e}-train.tfrecord", "{e}.tfrecord.gz", "{e}",
                          "{e}-{i:05d}-of-{n:05d}.tfrecord", "data.tfrecord-{e}"])
    names = []
    for i, content in enumerate(data):
        name = pattern.format(e=evil, i=i, n=len(data))
        if name in names:
            name = f"{i}{name}"
        names.append(name)
        with open(os.path.join(folder, name), "wb") as f:
            f.write(content)
    given = rng.choice(["dir", "file", "base"])
    path = folder if given == "dir" else os.path.join(folder, names[0]) if given == "file" \
        else os.path.join(folder, evil)
    return Case(path, f"TFRecord files {names!r}, given as the {given}")


def names_idx(rng, work, top):
    seed = rng.choice([s for s in seedlib.seeds("idx") if os.path.isdir(s)])
    evil = hostile_name(rng, top, filesystem=True)
    folder = os.path.join(work, "in", "idx")
    os.makedirs(folder)
    first = None
    for p in seedlib.files_of(seed):
        name = f"{evil}-{p.name}" if rng.random() < 0.8 else p.name
        with open(os.path.join(folder, name), "wb") as f:
            f.write(p.read_bytes())
        if "train-images" in name:
            first = os.path.join(folder, name)
    given = rng.choice(["dir", "dir", "file", "prefix"])
    if given == "file" and first:
        return Case(first, f"IDX files prefixed {evil!r}, given as a file")
    extra = ["--prefix", evil] if given == "prefix" and "\0" not in evil else []
    return Case(folder, f"IDX files prefixed {evil!r} {extra}", extra_args=extra)


# --- labels ----------------------------------------------------------------------------

LABEL_VALUES = [0, 1, 9, 10, 255, 256, 65535, 65536, -1, -128, 2 ** 31 - 1, -(2 ** 31),
                10 ** 8, 2 ** 32, 2 ** 63 - 1, -(2 ** 63), 2 ** 64 - 1, float("nan"),
                float("inf"), float("-inf"), 1e300, 0.5, -0.0, 1e-300]
LABEL_DTYPES = ["<i8", "<f8", "<u8", ">i8", "<i4", "<u4", "<i2", "<u2", "|i1", "|u1",
                "<f4", "<f2", "|b1"]


def label_array(rng, n, dtype):
    values = [rng.choice(LABEL_VALUES) if rng.random() < 0.6 else rng.randrange(10)
              for _ in range(n)]
    out = np.empty(n, dtype)
    with np.errstate(all="ignore"):
        for i, v in enumerate(values):
            try:
                out[i] = v
            except (OverflowError, ValueError):
                out[i] = np.array(v, np.float64).astype(dtype)
    return out, values


def labels_npz(rng, work, top):
    seed = rng.choice(seedlib.seeds("npz"))
    members = _npz_members(seed)
    dtype = rng.choice(LABEL_DTYPES)
    described = []
    for k, (name, content, t) in enumerate(members):
        if name.startswith("y_"):
            n = np.lib.format.read_array(io.BytesIO(content)).shape[0]
            labels, values = label_array(rng, n, dtype)
            buf = io.BytesIO()
            np.lib.format.write_array(buf, labels)
            members[k] = (name, buf.getvalue(), t)
            described.append(f"{name} {dtype} {values}")
    target = os.path.join(work, "in", "labels.npz")
    with open(target, "wb") as f:
        f.write(_zip(members))
    return Case(target, "npz labels: " + "; ".join(described))


IDX_LABEL_TYPES = {0x08: "u1", 0x09: "i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4",
                   0x0E: ">f8"}


def labels_idx(rng, work, top):
    seed = rng.choice([s for s in seedlib.seeds("idx") if os.path.isdir(s)])
    folder = os.path.join(work, "in", "idx")
    os.makedirs(folder)
    code = rng.choice(sorted(IDX_LABEL_TYPES))
    described = []
    for p in seedlib.files_of(seed):
        data = p.read_bytes()
        name = p.name
        if "labels" in name:
            kind, payload = container(data)
            n = struct.unpack(">I", payload[4:8])[0]
            labels, values = label_array(rng, n, IDX_LABEL_TYPES[code])
            payload = bytes([0, 0, code, 1]) + struct.pack(">I", n) + labels.tobytes()
            data = payload if kind == "raw" else gzip.compress(payload, 1, mtime=0)
            described.append(f"{name} type 0x{code:02X} {values}")
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data)
    return Case(folder, "IDX labels: " + "; ".join(described))


def labels_gdmnist(rng, work, top):
    files = _gdmnist_files()
    split, data = rng.choice(sorted(files.items()))
    count, rows, cols, _, label_at, index_at = struct.unpack("<6I", data[8:32])
    data = bytearray(data)
    values = [rng.choice([0, 9, 10, 11, 128, 255]) for _ in range(count)]
    data[label_at:label_at + count] = bytes(values)
    indices = [rng.choice([0, 1, 59999, 60000, 2 ** 31 - 1, 2 ** 32 - 1, 10 ** 8])
               for _ in range(count)] if rng.random() < 0.5 else None
    if indices:
        data[index_at:index_at + 4 * count] = struct.pack(f"<{count}I", *indices)
    target = os.path.join(work, "in", f"{split}.bin")
    with open(target, "wb") as f:
        f.write(data)
    return Case(target, f"GDMNIST1 labels {values} indices {indices}")


def _mask(c):
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def crc32c(parts):
    import google_crc32c
    crc = 0
    for part in parts:
        crc = google_crc32c.extend(crc, part)
    return crc


def frame(data: bytes) -> bytes:
    length = struct.pack("<Q", len(data))
    return length + struct.pack("<I", _mask(crc32c([length]))) + data + \
        struct.pack("<I", _mask(crc32c([data])))


def records(payload):
    pos, out = 0, []
    while pos + 12 <= len(payload):
        (n,) = struct.unpack("<Q", payload[pos:pos + 8])
        out.append(payload[pos + 12:pos + 12 + n])
        pos += 16 + n
    return out


def _varint(n):
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number, payload):
    """A length-delimited protobuf field."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def label_feature(rng):
    """(serialized Feature, description) of a hostile label. Built as bytes: a one-hot
    row of 10^6 values is 1 MB on the wire, but 10^6 Python ints to build through the
    protobuf API (seconds per case)."""
    how = rng.choice(["index", "index", "onehot", "float", "many", "bytes"])
    if how == "index":
        value = rng.choice([v for v in LABEL_VALUES if isinstance(v, int)])
        return _field(3, _field(1, _varint(value))), f"index {value}"
    if how == "onehot":
        width = rng.choice([2, 10, 11, 256, 65536, 65537, 10 ** 5, 10 ** 6])
        hot = rng.randrange(width)
        row = b"\0" * hot + b"\1" + b"\0" * (width - hot - 1)
        return _field(3, _field(1, row)), f"one-hot of {width} at {hot}"
    if how == "float":
        value = rng.choice([float("nan"), float("inf"), 1e30, -1.0, 3.0])
        return _field(2, _field(1, struct.pack("<f", value))), f"float {value}"
    if how == "many":
        width = rng.choice([10 ** 5, 10 ** 6, 4 * 10 ** 6])
        value = rng.choice([1, -1, 2 ** 63 - 1])
        return _field(3, _field(1, _varint(value) * width)), f"{width} values {value}"
    return _field(1, _field(1, b"9")), "bytes b'9'"


def labels_tfrecord(rng, work, top):
    from mnistconv.codecs.example import example_class
    Example = example_class()
    seed = rng.choice(seedlib.seeds("tfrecord"))
    victim = seedlib.files_of(seed)[0]
    kind, payload = container(victim.read_bytes())
    out = []
    described = []
    for k, data in enumerate(records(payload)):
        if k == 0 or rng.random() < 0.5:
            example = Example.FromString(data)
            feature = example.features.feature
            key = "image/class/label" if "image/class/label" in feature else "label"
            del feature[key]
            value, what = label_feature(rng)
            entry = _field(1, key.encode()) + _field(2, value)
            # A second Features field merges into the first: the label entry is added.
            data = example.SerializeToString(deterministic=True) + \
                _field(1, _field(1, entry))
            described.append(f"record {k} label {what}")
        out.append(frame(data))
    target = os.path.join(work, "in", victim.name)
    with open(target, "wb") as f:
        f.write(wrap(kind, b"".join(out)))
    return Case(target, f"TFRecord ({kind}): {'; '.join(described)}")


# --- compression ratio -------------------------------------------------------------------

@lru_cache(maxsize=None)
def _deflated_zeros_mib():
    """Raw deflate of 1 MiB of zeros, ending byte-aligned and not final, so copies can
    follow one another and other sync-flushed pieces (as pigz joins its blocks)."""
    z = zlib.compressobj(9, zlib.DEFLATED, -15)
    return z.compress(bytes(MIB)) + z.flush(zlib.Z_SYNC_FLUSH)


def _deflate_piece(data):
    z = zlib.compressobj(9, zlib.DEFLATED, -15)
    return z.compress(data) + z.flush(zlib.Z_SYNC_FLUSH)


def deflate_parts(parts):
    """(raw deflate stream, crc32, adler32, length) of parts: bytes, or an int = that
    many zero bytes. Zeros cost about 1 KB per MiB."""
    out, crc, adler, total = [], 0, 1, 0
    zero = bytes(MIB)
    for part in parts:
        if isinstance(part, int):
            whole, rest = divmod(part, MIB)
            out.append(_deflated_zeros_mib() * whole)
            for _ in range(whole):
                crc, adler = zlib.crc32(zero, crc), zlib.adler32(zero, adler)
            part = bytes(rest)
        out.append(_deflate_piece(part))
        crc, adler = zlib.crc32(part, crc), zlib.adler32(part, adler)
    total = sum(p if isinstance(p, int) else len(p) for p in parts)
    out.append(zlib.compressobj(9, zlib.DEFLATED, -15).flush(zlib.Z_FINISH))
    return b"".join(out), crc, adler, total


def gzip_parts(parts):
    stream, crc, _, total = deflate_parts(parts)
    return b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff" + stream + \
        struct.pack("<II", crc, total & 0xFFFFFFFF)


def zlib_parts(parts):
    stream, _, adler, _ = deflate_parts(parts)
    return b"\x78\xda" + stream + struct.pack(">I", adler)


def bomb_mib(rng):
    """Expanded size: mostly small, now and then 64 or 256 MiB."""
    return rng.choices([1, 4, 16, 64, 256], weights=[50, 25, 15, 8, 2])[0]


def ratio_idx(rng, work, top):
    folder = os.path.join(work, "in", "idx")
    os.makedirs(folder)
    mib = bomb_mib(rng)
    item = 784
    how = rng.choice(["honest", "trailing", "short", "members", "labels"])
    n = max(1, mib * MIB // item)
    if how == "honest":
        n = min(n, (64 * MIB) // item)
        images = [struct.pack(">IIII", 0x803, n, 28, 28), n * item]
        labels = [struct.pack(">II", 0x801, n), n]
    elif how == "trailing":
        images = [struct.pack(">IIII", 0x803, 3, 28, 28), 3 * item, mib * MIB]
        labels = [struct.pack(">II", 0x801, 3), bytes(3)]
    elif how == "short":
        declared = rng.choice([n * 2, 10 ** 6, 2 ** 31, 2 ** 32 - 1])
        images = [struct.pack(">IIII", 0x803, declared, 28, 28), mib * MIB]
        labels = [struct.pack(">II", 0x801, declared), min(declared, mib * MIB)]
    elif how == "members":
        images = [struct.pack(">IIII", 0x803, 3, 28, 28), 3 * item]
        labels = [struct.pack(">II", 0x801, 3), bytes(3)]
    else:
        images = [struct.pack(">IIII", 0x803, 3, 28, 28), 3 * item]
        labels = [struct.pack(">II", 0x801, n), n]
    data = gzip_parts(images)
    if how == "members":
        data += gzip_parts([mib * MIB])
    with open(os.path.join(folder, "train-images-idx3-ubyte.gz"), "wb") as f:
        f.write(data)
    with open(os.path.join(folder, "train-labels-idx1-ubyte.gz"), "wb") as f:
        f.write(gzip_parts(labels))
    return Case(folder, f"IDX gzip bomb {how}, {mib} MiB of zeros")


def _local_zip(members):
    """A zip of deflated members given as (name, parts, declared size or None): written
    here, not by zipfile, so a member's sizes can lie and nothing is compressed twice."""
    body, central = [], []
    offset = 0
    for name, parts, declared in members:
        stream, crc, _, total = deflate_parts(parts)
        size = total if declared is None else declared
        name = name.encode()
        local = struct.pack("<4s5H3I2H", b"PK\x03\x04", 20, 0, 8, 0, 0x21, crc,
                            len(stream), size & 0xFFFFFFFF, len(name), 0) + name
        central.append(struct.pack("<4s6H3I5H2I", b"PK\x01\x02", 20, 20, 0, 8, 0, 0x21,
                                   crc, len(stream), size & 0xFFFFFFFF, len(name), 0, 0,
                                   0, 0, 0, offset) + name)
        body += [local, stream]
        offset += len(local) + len(stream)
    cd = b"".join(central)
    end = struct.pack("<4s4H2IH", b"PK\x05\x06", 0, 0, len(members), len(members), len(cd),
                      offset, 0)
    return b"".join(body) + cd + end


def _npy_header(shape, descr="|u1"):
    text = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape!r}, }}"
    pad = -(10 + len(text) + 1) % 64
    header = (text + " " * pad + "\n").encode("latin1")
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header


def ratio_npz(rng, work, top):
    mib = bomb_mib(rng)
    n = max(1, mib * MIB // 784)
    how = rng.choice(["honest", "trailing", "short", "size-lie", "labels"])
    y = ("y_train.npy", [_npy_header((3,)), bytes(3)], None)
    if how == "honest":
        n = min(n, (64 * MIB) // 784)
        x = ("x_train.npy", [_npy_header((n, 28, 28)), n * 784], None)
        y = ("y_train.npy", [_npy_header((n,)), n], None)
    elif how == "trailing":
        x = ("x_train.npy", [_npy_header((3, 28, 28)), 3 * 784 + mib * MIB], None)
    elif how == "short":
        x = ("x_train.npy", [_npy_header((rng.choice([n * 2, 2 ** 31, 10 ** 12]), 28, 28)),
                             mib * MIB], None)
    elif how == "size-lie":
        x = ("x_train.npy", [_npy_header((3, 28, 28)), 3 * 784 + mib * MIB],
             rng.choice([3 * 784 + 128, 0, 2 ** 32 - 1]))
    else:
        x = ("x_train.npy", [_npy_header((3, 28, 28)), 3 * 784], None)
        y = ("y_train.npy", [_npy_header((3,), rng.choice(["<i8", "<f8", "<u8"])),
                             mib * MIB], None)
    target = os.path.join(work, "in", "bomb.npz")
    with open(target, "wb") as f:
        f.write(_local_zip([x, y]))
    return Case(target, f"npz deflate bomb {how}, {mib} MiB of zeros")


def ratio_gdmnist(rng, work, top):
    from mnistconv.formats.gdmnist import header_bytes, layout
    mib = bomb_mib(rng)
    n = max(1, mib * MIB // 784)
    how = rng.choice(["honest", "trailing", "short", "members"])
    if how == "honest":
        n = min(n, (64 * MIB) // 789)
        parts = [header_bytes(n, 28, 28), layout(n, 28, 28)[3] - 32]
    elif how == "short":
        declared = rng.choice([n * 2, 10 ** 6, 5 * 10 ** 6])
        parts = [header_bytes(declared, 28, 28), mib * MIB]
    else:
        parts = [header_bytes(3, 28, 28), layout(3, 28, 28)[3] - 32]
        if how == "trailing":
            parts.append(mib * MIB)
    data = gzip_parts(parts)
    if how == "members":
        data += gzip_parts([mib * MIB])
    target = os.path.join(work, "in", "bomb.bin.gz")
    with open(target, "wb") as f:
        f.write(data)
    return Case(target, f"GDMNIST1 gzip bomb {how}, {mib} MiB of zeros")


def ratio_tfrecord(rng, work, top):
    seed = rng.choice(seedlib.seeds("tfrecord"))
    _, payload = container(seedlib.files_of(seed)[0].read_bytes())
    good = records(payload)[:rng.randrange(0, 3)]
    mib = bomb_mib(rng)
    how = rng.choice(["trailing", "record", "length", "members"])
    parts = [b"".join(frame(r) for r in good)]
    if how == "trailing":
        parts.append(mib * MIB)
    elif how == "record":  # an honest record of zeros (its CRC right): the data is there
        size = min(mib, 64) * MIB
        length = struct.pack("<Q", size)
        import google_crc32c
        crc = 0
        zero = bytes(MIB)
        for _ in range(size // MIB):
            crc = google_crc32c.extend(crc, zero)
        parts += [length + struct.pack("<I", _mask(crc32c([length]))), size,
                  struct.pack("<I", _mask(crc))]
    elif how == "length":
        length = struct.pack("<Q", rng.choice([257 * MIB, 2 ** 40, 2 ** 64 - 1]))
        parts += [length + struct.pack("<I", _mask(crc32c([length]))), mib * MIB]
    kind = rng.choice(["gzip", "zlib"]) if how != "members" else "gzip"
    data = gzip_parts(parts) if kind == "gzip" else zlib_parts(parts)
    if how == "members":
        data += gzip_parts([mib * MIB])
    target = os.path.join(work, "in", "bomb.tfrecord")
    with open(target, "wb") as f:
        f.write(data)
    return Case(target, f"TFRecord {kind} bomb {how}, {mib} MiB of zeros after "
                        f"{len(good)} good records")


FAMILIES = {
    "names": {"npz": names_npz, "gdmnist": names_gdmnist, "tfrecord": names_tfrecord,
              "idx": names_idx},
    "labels": {"npz": labels_npz, "gdmnist": labels_gdmnist, "tfrecord": labels_tfrecord,
               "idx": labels_idx},
    "ratio": {"npz": ratio_npz, "gdmnist": ratio_gdmnist, "tfrecord": ratio_tfrecord,
              "idx": ratio_idx},
}

# The readers added later: their builders are in hostile_formats.py, hostile_trees.py and
# hostile_colour.py (CIFAR, CIFAR python, SVHN, MedMNIST)
# (imported here, at the end, as they use the helpers above), which say where a family
# does not apply to a reader.
try:
    from . import hostile_budget, hostile_colour, hostile_formats, hostile_links, \
        hostile_listings, hostile_trees
except ImportError:
    import hostile_budget
    import hostile_colour
    import hostile_formats
    import hostile_links
    import hostile_listings
    import hostile_trees
for _more in (hostile_formats.FAMILIES, hostile_trees.FAMILIES, hostile_listings.FAMILIES,
              hostile_budget.FAMILIES, hostile_colour.FAMILIES):
    for _family, _builders in _more.items():
        FAMILIES.setdefault(_family, {}).update(_builders)
# Symlink trees, in and out, apply to every reader (hostile_links.py).
FAMILIES.update(hostile_links.families(sorted(set().union(*FAMILIES.values()))))
