"""Tracebacks issue 35 found, each now one line naming the file (exit 1 for bad data,
2 for usage): TFDS metadata fields of the wrong JSON type, an LMDB entry count below its
records, 5,000-digit numbers in a PAX size or a KMNIST class map, an S3 key with '//',
an unknown Beam runner, SIGINT in the first 20 ms."""

import json

import pytest

from helpers import make_idx_dir, run, small_digits, stderr_of

BIG = "__5000_digits__"  # written as a 5,000-digit number
WRONG_TYPES = [[], "x", 7, 1.5, True, {}, None, BIG]


def dumps(doc):
    return json.dumps(doc).replace(f'"{BIG}"', "9" * 5000)


def _json_paths(value, at=()):
    yield at
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _json_paths(v, at + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _json_paths(v, at + (i,))


def _replaced(doc, at, new):
    if not at:
        return new
    doc = json.loads(json.dumps(doc))
    holder = doc
    for key in at[:-1]:
        holder = holder[key]
    holder[at[-1]] = new
    return doc


def one_line(r, *codes):
    err = stderr_of(r)
    assert r.returncode in codes and "Traceback" not in err, err[-3000:]
    assert len(err.strip().splitlines()) == 1 and err.startswith("Error: "), err[-3000:]
    return err


@pytest.mark.parametrize("name", ["features.json", "dataset_info.json"])
def test_tfds_metadata_of_every_wrong_json_type_is_one_line(tmp_path, name):
    """Every field of the file (every object key and array item, and the whole) replaced
    by a value of each other JSON type: read, or one line naming the file."""
    make_idx_dir(tmp_path / "src", *small_digits(20, seed=3), "test")
    out = tmp_path / "tfds"
    assert run("convert", tmp_path / "src", out, "--to", "tfds", "-q").returncode == 0
    [meta] = list(out.rglob(name))
    original = json.loads(meta.read_text())
    failures = []
    for at in list(_json_paths(original)):
        for new in WRONG_TYPES:
            meta.write_text(dumps(_replaced(original, at, new)))
            r = run("info", out)
            err = stderr_of(r)
            if r.returncode != 0 and ("Traceback" in err or not err.startswith(
                    f"Error: {out}") or len(err.strip().splitlines()) != 1):
                failures.append((at, repr(new)[:20], err.strip().splitlines()[-1][:200]))
    assert not failures, failures[:10]


# MDB_meta after the 16-byte page header: magic, version (4 + 4), address, mapsize
# (8 + 8), the free-pages MDB_db (48), then the main MDB_db, whose md_entries is 40
# bytes in (pad 4, flags 2, depth 2, branch, leaf and overflow pages 8 each).
ENTRIES_OFFSET = 16 + 8 + 16 + 48 + 32


@pytest.mark.parametrize("change", [-1, -20, +3])
def test_an_lmdb_entry_count_unlike_its_records_is_one_line(tmp_path, change):
    pytest.importorskip("lmdb")
    import lmdb
    import struct
    make_idx_dir(tmp_path / "src", *small_digits(20, seed=3), "test")
    out = tmp_path / "lmdb"
    assert run("convert", tmp_path / "src", out, "--to", "caffe-lmdb", "-q").returncode == 0
    [data] = list(out.rglob("data.mdb"))
    env = lmdb.open(str(data), subdir=False, readonly=True, lock=False)
    psize, count = env.stat()["psize"], env.stat()["entries"]
    env.close()
    assert count == 20
    raw = bytearray(data.read_bytes())
    pages = [p for p in (0, psize)  # the newer meta page of the two
             if struct.unpack_from("<Q", raw, p + ENTRIES_OFFSET)[0] == count]
    assert pages
    for page in pages:
        struct.pack_into("<Q", raw, page + ENTRIES_OFFSET, count + change)
    data.write_bytes(bytes(raw))
    env = lmdb.open(str(data), subdir=False, readonly=True, lock=False)
    assert env.stat()["entries"] == count + change  # what liblmdb itself now says
    env.close()
    r = run("convert", out, tmp_path / "out.npz")
    err = one_line(r, 1)
    assert err.startswith(f"Error: {data}: holds ")
    assert not (tmp_path / "out.npz").exists()


def test_a_5000_digit_kmnist_class_index_is_one_line(tmp_path):
    import numpy as np
    folder = tmp_path / "k"
    folder.mkdir()
    np.savez(folder / "kmnist-train-imgs.npz", np.zeros((2, 28, 28), np.uint8))
    np.savez(folder / "kmnist-train-labels.npz", np.array([0, 1], np.uint8))
    classmap = folder / "kmnist_classmap.csv"
    classmap.write_text("index,codepoint,char\n0,U+304A,\u304a\n" + "9" * 5000 +
                        ",U+304D,\u304d\n", "utf-8")
    err = one_line(run("info", folder), 1, 2)
    assert err.startswith(f"Error: {classmap}: line 3: index '9999")
    assert "is out of range or repeated" in err


def test_a_5000_digit_pax_size_is_one_line(tmp_path):
    import tarfile
    make_idx_dir(tmp_path / "src", *small_digits(10, seed=3), "test")
    shard = tmp_path / "w.tar"
    assert run("convert", tmp_path / "src", shard, "--to", "webdataset", "-q").returncode == 0
    [written] = [p for p in tmp_path.iterdir() if p.name.endswith(".tar")]
    # tarfile's own PAX header ('x', applying to the member after it), before the first.
    pax = tarfile.TarInfo._create_pax_generic_header({"size": "9" * 5000},
                                                     tarfile.XHDTYPE, "utf-8")
    written.write_bytes(pax + written.read_bytes())
    err = one_line(run("info", written), 1)
    assert err.startswith(f"Error: {written}: PAX size of 5,000 digits is larger than any file")


def test_an_unknown_beam_runner_is_one_line_before_anything_is_written(tmp_path):
    pytest.importorskip("apache_beam")
    make_idx_dir(tmp_path / "src", *small_digits(10, seed=3), "test")
    r = run("convert", tmp_path / "src", tmp_path / "out" / "m.tfrecord", "--runner", "beam",
            "--beam-option", "runner=NoSuchRunner")
    err = one_line(r, 2)
    assert err.startswith("Error: --beam-option runner=NoSuchRunner: Beam has no such "
                          "runner; name one of ")
    assert "DirectRunner" in err
    assert not (tmp_path / "out").exists()


def test_an_s3_key_with_an_empty_part_is_one_line(tmp_path, s3_server, bucket):
    """A folder whose only key is 'a//b.npz' (an empty name part, skipped as unsafe):
    the spool held nothing and the detection indexed past it."""
    from test_remote import s3_env
    fs, name = bucket
    make_idx_dir(tmp_path / "src", *small_digits(10, seed=3), "test")
    assert run("convert", tmp_path / "src", tmp_path / "m.npz", "-q").returncode == 0
    fs.pipe(f"{name}/a//b.npz", (tmp_path / "m.npz").read_bytes())
    r = run("info", f"s3://{name}/a/", env=s3_env(s3_server))
    err = one_line(r, 2)
    assert err == (f"Error: s3://{name}/a: holds no file mnistconv can copy (a key with "
                   "an empty part, as 'a//b', is not read); check the path\n")
