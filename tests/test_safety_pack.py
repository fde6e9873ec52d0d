"""Hostile browser packs and GDMNIST1 files (issue 12): names from a manifest or a file
name never become paths, a manifest never reaches outside its pack, wrong JSON is one
line, decompression bombs and huge images stay within bounded memory, FIFOs are named,
and a busy port is said as such. Every hostile input is built here."""

import gzip
import json
import os
import socket
import shutil
import struct
import subprocess
import sys
import zlib

import numpy as np
import pytest

import mnistconv
from mnistconv.packs import browser as pack
from mnistconv.formats import gdmnist
from helpers import REPO, run

FIX_PATHS = "a manifest names files inside its own directory only"
FIX_TYPES = "a manifest is the JSON `mnistconv pack browser` writes"
SAFE_NAMES = ("split names are letters, digits, '_', '-' and '.' (not leading), at most "
              "64 characters")


def gd_bytes(n=4, rows=28, columns=28, seed=0):
    """A small valid GDMNIST1 file, encoded here (not by mnistconv)."""
    rng = np.random.default_rng(seed)
    label_offset = 32 + n * rows * columns
    index_offset = -(-(label_offset + n) // 4) * 4
    return (b"GDMNIST1" + struct.pack("<6I", n, rows, columns, 32, label_offset,
                                      index_offset)
            + rng.integers(0, 256, n * rows * columns, dtype=np.uint8).tobytes()
            + rng.integers(0, 10, n, dtype=np.uint8).tobytes()
            + bytes(index_offset - label_offset - n) + np.arange(n, dtype="<u4").tobytes())


def make_pack(folder, manifest, files=("test.bin",)):
    """A pack directory: the named files (valid GDMNIST1) and manifest.json (a dict is
    dumped as JSON, a str written as it is)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in files:
        (folder / name).write_bytes(gd_bytes())
    text = manifest if isinstance(manifest, str) else json.dumps(manifest)
    (folder / "manifest.json").write_text(text)
    return folder


def tree(root):
    """Every path under root (a snapshot, to prove nothing was written)."""
    return sorted(os.path.join(d, n) for d, dirs, files in os.walk(root)
                  for n in dirs + files)


def one_line_error(r, code=1):
    err = r.stderr.decode()
    assert r.returncode == code, err
    assert err.count("\n") == 1 and err.startswith("Error: ") and "Traceback" not in err
    return err


# --- 1. split names from a manifest or a file name are never paths -------------------

@pytest.mark.parametrize("split_id", ["../../ESCAPED", "/tmp/abs", "a/b", "x\ny", ".hidden",
                                      "-rf", "t" * 65])
def test_unsafe_split_id_is_refused_before_anything_is_written(tmp_path, split_id):
    work = tmp_path / "a" / "b"
    packdir = make_pack(work / "pack", {"splits": {"test": {"id": split_id,
                                                            "file": "test.bin"}}})
    before = tree(tmp_path)
    manifest = packdir / "manifest.json"
    shown = repr(split_id) if len(repr(split_id)) <= 80 else repr(split_id)[:76] + "...'"
    want = (f"Error: {manifest}: splits 'test': split id {shown} is not a safe name; "
            f"{SAFE_NAMES}\n")
    for args in (["gdmnist-to-idx", packdir, work / "out"], ["info", packdir],
                 ["verify", packdir], ["gdmnist-to-npz", packdir, work / "o.npz"]):
        r = run(*args, cwd=work)
        assert one_line_error(r) == want, args
        assert r.stdout == b""
    assert tree(tmp_path) == before
    assert not os.path.exists("/tmp/abs-images-idx3-ubyte")


def test_unsafe_split_names_from_file_names_are_refused(tmp_path):
    folder = tmp_path / "dir"
    folder.mkdir()
    (folder / "train.bin").write_bytes(gd_bytes())
    (folder / "bad name.bin").write_bytes(gd_bytes())
    r = run("gdmnist-to-idx", folder, tmp_path / "out")
    assert one_line_error(r) == (f"Error: {folder / 'bad name.bin'}: split name (from the "
                                 f"file name) 'bad name' is not a safe name; {SAFE_NAMES}\n")
    single = tmp_path / "x\ny.bin"
    single.write_bytes(gd_bytes())
    r = run("gdmnist-to-npz", single, tmp_path / "o.npz")
    shown = str(single).replace("\n", "\\n")  # the CLI escapes it: one line
    assert one_line_error(r) == (f"Error: {shown}: split name (from the file name) "
                                 f"'x\\ny' is not a safe name; {SAFE_NAMES}\n")
    assert sorted(os.listdir(tmp_path)) == ["dir", "x\ny.bin"]


def test_a_split_id_listed_twice_is_refused(tmp_path):
    packdir = make_pack(tmp_path / "p", {"splits": {
        "a": {"id": "test", "file": "test.bin"}, "b": {"id": "test", "file": "two.bin"}}},
        files=("test.bin", "two.bin"))
    r = run("info", packdir)
    assert one_line_error(r) == (f"Error: {packdir / 'manifest.json'}: splits 'b': split "
                                 f"id 'test' is listed twice; {FIX_TYPES}\n")


# --- 2. a manifest never reaches outside its pack ---------------------------------------

def _outside_cases(tmp_path):
    secret = tmp_path / "secret.bin"
    secret.write_bytes(gd_bytes(seed=9))
    return {
        "absolute": (str(secret), "is an absolute path"),
        "etc passwd": ("/etc/passwd", "is an absolute path"),
        "dot dot": ("../secret.bin", "is not a normalised path inside the pack "
                                     "('..', '.' or '//')"),
        "dot dot inside": ("sub/../test.bin", "is not a normalised path inside the pack "
                                              "('..', '.' or '//')"),
        "dot": ("./test.bin", "is not a normalised path inside the pack ('..', '.' or "
                              "'//')"),
        "double slash": ("sub//test.bin", "is not a normalised path inside the pack "
                                          "('..', '.' or '//')"),
        "nul": ("test.bin\0x", "is not a plain file name"),
        "backslash": ("..\\secret.bin", "is not a plain file name"),
    }


@pytest.mark.parametrize("key", ["file", "gzip_file", "preview"])
@pytest.mark.parametrize("case", ["absolute", "etc passwd", "dot dot", "dot dot inside",
                                  "dot", "double slash", "nul", "backslash"])
def test_manifest_paths_outside_the_pack_are_refused_before_reading(tmp_path, monkeypatch,
                                                                    key, case):
    value, problem = _outside_cases(tmp_path)[case]
    entry = {"id": "test", "file": "test.bin"}
    manifest = {"splits": {"test": entry}}
    if key == "preview":
        manifest["preview"] = {"file": value, "bytes": 1, "sha256": "x"}
        what = "preview file"
    else:
        entry[key] = value
        what = f"split 'test' {key}"
    packdir = make_pack(tmp_path / "pack", manifest)
    path = packdir / "manifest.json"
    # A quoted name over 80 characters is cut (the absolute one, in a long tmp_path).
    shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:76] + "...'"
    want = f"Error: {path}: {what} {shown} {problem}; {FIX_PATHS}\n"
    for args in (["verify", packdir], ["verify", packdir, "--json"],
                 ["gdmnist-to-idx", packdir, tmp_path / "out"]):
        r = run(*args)
        assert one_line_error(r) == want, args
        # No size, hash or first bytes of what lies outside: --json gives the error
        # object and nothing more.
        assert r.stdout == (json.dumps({"error": want[len("Error: "):-1], "exit": 1,
                                        "file": str(path)}, indent=2).encode() + b"\n"
                            if "--json" in args else b""), args
    assert not (tmp_path / "out").exists()
    # In process: not one file is hashed, sized or opened as GDMNIST1.
    def never(*a, **k):
        raise AssertionError("a file was read")
    monkeypatch.setattr(pack, "file_digest", never)
    monkeypatch.setattr(gdmnist, "_open_checked", never)
    with pytest.raises(mnistconv.FormatError) as e:
        pack.verify(packdir)
    assert f"Error: {e.value}\n" == want
    with pytest.raises(mnistconv.FormatError):
        mnistconv.read(packdir)


@pytest.mark.parametrize("target", ["outside file", "outside dir", "dangling"])
def test_a_symlink_leading_out_of_the_pack_is_refused(tmp_path, target):
    secret = tmp_path / "secret.bin"
    secret.write_bytes(gd_bytes(seed=9))
    packdir = make_pack(tmp_path / "pack", {"splits": {"test": {
        "id": "test", "file": "test.bin", "gzip_file": "sub/test.bin.gz"}}})
    (packdir / "sub").mkdir()
    link = packdir / "sub" / "test.bin.gz"
    if target == "outside file":
        link.symlink_to(secret)
    elif target == "outside dir":  # the pack's subdirectory is the link
        (packdir / "sub").rmdir()
        (tmp_path / "elsewhere").mkdir()
        (tmp_path / "elsewhere" / "test.bin.gz").write_bytes(gzip.compress(gd_bytes()))
        (packdir / "sub").symlink_to(tmp_path / "elsewhere")
    else:
        link.symlink_to(tmp_path / "nowhere")
    want = (f"Error: {packdir / 'manifest.json'}: split 'test' gzip_file 'sub/test.bin.gz' "
            f"resolves outside the pack directory (through a symbolic link); {FIX_PATHS}\n")
    for args in (["verify", packdir], ["info", packdir, "--from", "gdmnist"]):
        r = run(*args)
        assert one_line_error(r) == want, args
        assert r.stdout == b""


def test_a_symlink_inside_the_pack_is_followed(tmp_path):
    packdir = make_pack(tmp_path / "pack", {"splits": {"test": {"id": "test",
                                                                "file": "alias.bin"}}})
    (packdir / "alias.bin").symlink_to("test.bin")
    ds = mnistconv.read(packdir)
    assert list(ds.splits) == ["test"] and ds.splits["test"].header.count == 4


WRONG_TYPES = {
    "count as a string": ('{"splits": {"test": {"id": "test", "file": "test.bin", '
                          '"count": "x"}}}', "splits 'test': 'count' is a string, expected "
                                             "a non-negative integer; " + FIX_TYPES),
    "negative bytes": ('{"splits": {"test": {"id": "test", "file": "test.bin", '
                       '"bytes": -1}}}', "splits 'test': 'bytes' is a number, expected a "
                                         "non-negative integer; " + FIX_TYPES),
    "bool count": ('{"splits": {"test": {"file": "test.bin", "count": true}}}',
                   "splits 'test': 'count' is true/false, expected a non-negative "
                   "integer; " + FIX_TYPES),
    "file as a number": ('{"splits": {"test": {"id": "test", "file": 5}}}',
                         "splits 'test': 'file' is a number, expected a string; "
                         + FIX_TYPES),
    "id as a list": ('{"splits": {"test": {"id": ["a"], "file": "test.bin"}}}',
                     "splits 'test': 'id' is an array, expected a string; " + FIX_TYPES),
    "splits as a list": ('{"splits": [{"id": "test", "file": "test.bin"}]}',
                         "not a browser-pack manifest: no 'splits' object; name a pack's "
                         "manifest.json, or its directory"),
    "optional splits as a list": ('{"splits": {}, "optional_splits": []}',
                                  "'optional_splits' is an array, expected an object; "
                                  + FIX_TYPES),
    "entry as a string": ('{"splits": {"test": "test.bin"}}',
                          "splits 'test': is a string, expected an object; " + FIX_TYPES),
    "class counts of strings": ('{"splits": {"test": {"file": "test.bin", "class_counts": '
                                '["a"]}}}', "splits 'test': 'class_counts' is an array, "
                                            "expected an array of non-negative integers; "
                                + FIX_TYPES),
    "preview as a string": ('{"splits": {"test": {"file": "test.bin"}}, "preview": "p"}',
                            "'preview' is a string, expected an object; " + FIX_TYPES),
    "preview file as an object": ('{"splits": {"test": {"file": "test.bin"}}, "preview": '
                                  '{"file": {}}}', "preview: 'file' is an object, expected "
                                                   "a string; " + FIX_TYPES),
    "total as an object": ('{"splits": {"test": {"file": "test.bin"}}, '
                           '"default_total_bytes": {"a": 1}}',
                           "'default_total_bytes' is an object, expected a non-negative "
                           "integer; " + FIX_TYPES),
    "top level a list": ("[1, 2]", "not a browser-pack manifest: no 'splits' object; name a pack's "
                         "manifest.json, or its directory"),
    "deep nesting": ("[" * 100000 + "]" * 100000,
                     "not valid JSON (nested deeper than mnistconv reads)"
                     "; the file is damaged: download, copy or convert it again"),
    "deep nesting of objects": ('{"a":' * 100000 + "1" + "}" * 100000,
                                "not valid JSON (nested deeper than mnistconv reads)"
                                "; the file is damaged: download, copy or convert it again"),
    "100000-digit number": ('{"splits": {}, "n": ' + "7" * 100000 + "}",
                            "not valid JSON (Exceeds the limit (4300 digits) for integer "
                            "string conversion: value has 100000 digits); the file is "
                            "damaged: download, copy or convert it again"),
    "not utf-8": ('{"splits": {"\udcff": 1}}', None),
    "too large": ('{"splits": {}}' + " " * (1 << 20), "is 1,048,590 bytes, more than a "
                                                      "manifest may hold (1,048,576); name a "
                                                      "pack's manifest.json, or its directory"),
}


@pytest.mark.parametrize("case", list(WRONG_TYPES))
def test_manifests_of_wrong_json_are_one_line_exit_1(tmp_path, case):
    text, message = WRONG_TYPES[case]
    packdir = tmp_path / "pack"
    packdir.mkdir()
    (packdir / "test.bin").write_bytes(gd_bytes())
    (packdir / "manifest.json").write_bytes(text.encode("utf-8", "surrogateescape"))
    path = packdir / "manifest.json"
    for args in (["verify", packdir], ["gdmnist-to-idx", packdir, tmp_path / "out"]):
        r = run(*args)
        err = one_line_error(r)
        if message:
            assert err == f"Error: {path}: {message}\n", args
        else:
            assert err.startswith(f"Error: {path}: not valid JSON ("), err
    assert sorted(os.listdir(tmp_path)) == ["pack"]


def test_a_control_character_in_a_manifest_value_stays_on_one_line(tmp_path):
    packdir = make_pack(tmp_path / "p", {"splits": {"test": {
        "id": "test", "file": "test.bin", "sha256": "a\nError: forged"}}})
    r = run("verify", packdir)
    assert r.returncode == 1
    lines = r.stderr.decode().splitlines()
    assert f"Error: {packdir / 'test.bin'}: sha256: expected 'a\\nError: forged', " \
           "found " in "\n".join(lines)
    assert not any(line.startswith("Error: forged") for line in lines)


# --- 3. bombs and huge images: bounded memory --------------------------------------------

def write_bomb(path, count, rows, columns):
    """A .bin.gz of zero images that declares exactly its content: a valid GDMNIST1 file
    of count*rows*columns bytes in a gzip file about 1/1000 of that. Written as gzip
    members (one compressed 16 MiB block repeated): quick to build."""
    total = gdmnist.layout(count, rows, columns)[3]
    block = 16 << 20
    zero_member = gzip.compress(bytes(block), 9, mtime=0)
    with open(path, "wb") as f:
        f.write(gzip.compress(gdmnist.header_bytes(count, rows, columns), 9, mtime=0))
        left = total - gdmnist.HEADER_BYTES
        f.write(zero_member * (left // block))
        f.write(gzip.compress(bytes(left % block), 9, mtime=0))
    return total


def peak_kb(*args, cwd=None):
    """Run the CLI in a child and return (CompletedProcess, its VmHWM in kB). VmHWM,
    not getrusage's maxrss, which carries over the forking parent's RSS."""
    code = ("import sys\n"
            "from mnistconv.cli import main\n"
            "try:\n"
            "    main(sys.argv[1:])\n"
            "except SystemExit as e:\n"
            "    code = e.code\n"
            "peak = next(l.split()[1] for l in open('/proc/self/status')\n"
            "            if l.startswith('VmHWM:'))\n"
            "sys.stderr.write(f'VmHWM {peak}\\n')\n"
            "sys.exit(code)\n")
    env = dict(os.environ, PYTHONPATH=str(REPO))
    r = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True,
                       env=env, cwd=cwd)
    *lines, last = r.stderr.decode().splitlines()
    assert last.startswith("VmHWM "), r.stderr
    r.stderr = "".join(line + "\n" for line in lines).encode()
    return r, int(last.split()[1])


@pytest.mark.parametrize("shape", [(400_000, 28, 28), (60_000_000, 1, 1)])
def test_a_gzip_bomb_under_1mb_stays_in_bounded_memory(tmp_path, shape):
    """~250-300 MB inside a gzip under 1 MB: info, verify and gdmnist-to-idx stream it
    (the 1 x 1 case held 8 bytes an index before: 480 MB for 60 million)."""
    packdir = tmp_path / "pack"
    packdir.mkdir()
    bomb = packdir / "test.bin.gz"
    total = write_bomb(bomb, *shape)
    assert os.path.getsize(bomb) < 1 << 20 and total > 250 << 20
    (packdir / "manifest.json").write_text(json.dumps({"splits": {"test": {
        "id": "test", "gzip_file": "test.bin.gz", "count": shape[0]}}}))
    commands = [["verify", packdir, "-q"], ["gdmnist-to-idx", bomb, tmp_path / "out", "-q"]]
    if shape[1] > 1:  # info's per-class table holds 8 bytes a label (cli/convert.py)
        commands.append(["info", bomb])
    for args in commands:
        r, peak = peak_kb(*args)
        assert "Traceback" not in r.stderr.decode(), r.stderr
        assert peak < 150_000, (args, peak)
        if args[0] == "gdmnist-to-idx":
            assert r.returncode == 0, r.stderr
            assert os.path.getsize(tmp_path / "out" / "t10k-labels-idx1-ubyte") == \
                8 + shape[0]
            shutil.rmtree(tmp_path / "out")


def test_one_image_is_capped_and_the_largest_allowed_one_is_not_held_by_info(tmp_path):
    big = tmp_path / "big.bin.gz"
    write_bomb(big, 1, 16384, 16384)  # 268 MB, exactly at limits.MAX_IMAGE_PIXELS
    r, peak = peak_kb("info", big, "--max-image-size", "16384x16384")
    assert r.returncode == 0, r.stderr
    assert peak < 150_000, peak
    over = tmp_path / "over.bin"
    over.write_bytes(gzip.compress(gdmnist.header_bytes(1, 16385, 16384)))
    r, peak = peak_kb("gdmnist-to-npz", over, tmp_path / "o.npz",
                      "--max-image-size", "16384x16384")
    assert one_line_error(r) == (f"Error: {over}: image of 16385x16384 exceeds mnistconv's "
                                 "limit of 268,435,456 pixels per image; raise it with "
                                 "--max-image-size WxH if the images are really that large\n")
    assert not (tmp_path / "o.npz").exists()


def test_info_of_a_large_file_of_large_images_is_bounded(tmp_path):
    """A ~100 MB sparse .bin of four 5000 x 5000 images: info hashes it and counts its
    labels without holding the images (it held all of them, three times, before)."""
    path = tmp_path / "large.bin"
    count, rows, columns = 4, 5000, 5000
    with open(path, "wb") as f:
        f.write(gdmnist.header_bytes(count, rows, columns))
        f.truncate(gdmnist.layout(count, rows, columns)[3])
    r, peak = peak_kb("info", path, "--json", "--max-image-size", "5000x5000")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["splits"]["large"]["count"] == 4
    assert peak < 120_000, peak  # the file is 100,000 kB


def test_batches_hold_at_most_batch_bytes(tmp_path):
    path = tmp_path / "x.bin"
    count, rows, columns = 7, 3000, 3000  # 9 MB each: three to a 32 MiB batch
    with open(path, "wb") as f:
        f.write(gdmnist.header_bytes(count, rows, columns))
        f.truncate(gdmnist.layout(count, rows, columns)[3])
    split = mnistconv.read(path).splits["x"]
    assert [len(b) for b in split.batches()] == [3, 3, 1]
    assert [len(b) for b in split.batches(2)] == [2, 2, 2, 1]


# --- 4. FIFOs and devices ---------------------------------------------------------------

def test_verify_names_a_fifo_or_device_and_never_blocks(tmp_path):
    fifo = tmp_path / "manifest.json"
    os.mkfifo(fifo)
    for target in (fifo, tmp_path, "/dev/null"):
        r = subprocess.run([sys.executable, "-m", "mnistconv", "verify", str(target)],
                           capture_output=True, timeout=20,
                           env=dict(os.environ, PYTHONPATH=str(REPO)))
        shown = fifo if target == tmp_path else target
        assert one_line_error(r, 2) == \
            f"Error: {shown}: is not a regular file (device, FIFO or socket); name a regular " \
            "file or a directory\n"
    r = run("verify", tmp_path / "nothing.json")
    assert one_line_error(r, 2) == \
        f"Error: {tmp_path / 'nothing.json'}: no such file or directory; check the path\n"


def test_a_fifo_inside_a_pack_is_named_not_opened(tmp_path):
    packdir = make_pack(tmp_path / "p", {"splits": {"test": {"id": "test",
                                                             "file": "test.bin"}}},
                        files=())
    os.mkfifo(packdir / "test.bin")
    env = dict(os.environ, PYTHONPATH=str(REPO))
    r = subprocess.run([sys.executable, "-m", "mnistconv", "verify", str(packdir)],
                       capture_output=True, timeout=20, env=env)
    assert r.returncode == 1
    assert r.stderr.decode() == (
        f"Error: {packdir / 'test.bin'}: file: expected a regular file, found a directory, "
        f"device, FIFO or socket\nError: {packdir / 'manifest.json'}: 1 check(s) failed\n")
    r = subprocess.run([sys.executable, "-m", "mnistconv", "gdmnist-to-idx", str(packdir),
                        str(tmp_path / "out")], capture_output=True, timeout=20, env=env)
    assert one_line_error(r, 2) == (f"Error: {packdir / 'test.bin'}: is not a regular file "
                                    "(device, FIFO or socket); name a regular file or a "
                                    "directory\n")


# --- 5. serve on a busy port ---------------------------------------------------------------

def test_serve_on_a_busy_port_names_it_and_suggests_port(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        r = subprocess.run([sys.executable, "-m", "mnistconv", "serve", str(tmp_path),
                            "--port", str(port)], capture_output=True, timeout=20,
                           env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert one_line_error(r, 2) == (f"Error: port {port} on 127.0.0.1 is already in use; "
                                    "choose another with --port (--port 0 picks a free "
                                    "one)\n")


# --- 6. one gzip writer, two OS bytes ----------------------------------------------------

def _deflate_written(data, pieces, **options):
    import io
    from mnistconv.io.parallel_gzip import DeflateWriter
    out = io.BytesIO()
    writer = DeflateWriter(out, **options)
    assert out.getvalue() == b""  # nothing before the first write, as zlib's wrapper
    step = max(1, -(-len(data) // pieces))
    for start in range(0, len(data), step):
        assert writer.write(data[start:start + step]) == len(data[start:start + step])
    writer.close()
    return out.getvalue()


@pytest.mark.parametrize("n", [0, 1, 50])
@pytest.mark.parametrize("pieces", [1, 7])
def test_one_deflate_writer_gives_zlib_gzip_and_gdmnist_gzip_byte_for_byte(n, pieces):
    """parallel_gzip.DeflateWriter is mnistconv's one deterministic gzip writer. By default its
    bytes are gzip.compress(data, 9, mtime=0)'s (OS byte 03, as zlib and `gzip -9n`);
    with os_byte=255 they are GDMNIST1's .bin.gz, the header Python's GzipFile writes
    and the published browser-v1 files carry. Only the OS byte differs; the sizes of
    the writes change nothing."""
    import io
    data = gd_bytes(n) if n else b""
    default = _deflate_written(data, pieces)
    ours = _deflate_written(data, pieces, os_byte=255)
    assert default == gzip.compress(data, 9, mtime=0)
    assert default[:10] == bytes.fromhex("1f8b0800000000000203")
    assert ours[:10] == bytes.fromhex("1f8b08000000000002ff")
    assert ours[10:] == default[10:]
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
    assert ours[10:-8] == deflate.compress(data) + deflate.flush()
    assert ours[-8:] == struct.pack("<II", zlib.crc32(data), len(data))
    python_gzip = io.BytesIO()
    with gzip.GzipFile(fileobj=python_gzip, mode="wb", compresslevel=9, mtime=0) as f:
        f.write(data)
    assert python_gzip.getvalue() == ours == gdmnist.gzip_bytes(data)
    assert zlib.decompress(ours, 31) == data
    assert _deflate_written(data, pieces, container="zlib") == zlib.compress(data, 9)

