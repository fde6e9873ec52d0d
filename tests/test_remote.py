"""Remote paths through fsspec (mnistconv.io.remote): memory://, a loopback HTTP server and
the S3 API of a moto server on 127.0.0.1 give the same bytes as local files; an upload
that fails half-way leaves no object under the final name; reading a remote input
keeps memory bounded; errors name the remote path in one line."""

import functools
import hashlib
import http.server
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from helpers import REPO, make_idx_dir, run, small_digits, stderr_of

fsspec = pytest.importorskip("fsspec")


def sha(data):
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def idx_dir(tmp_path):
    images, labels = small_digits(120, seed=7)
    make_idx_dir(tmp_path / "src", images[:80], labels[:80], "train")
    return make_idx_dir(tmp_path / "src", images[80:], labels[80:], "test")


@pytest.fixture
def memfs():
    fs = fsspec.filesystem("memory")
    yield fs
    fs.rm("/", recursive=True) if fs.ls("/") else None
    fs.store.clear()
    fs.pseudo_dirs[:] = [""]


def no_spools(folder):
    return [n for n in os.listdir(folder) if ".mnistconv-tmp-" in n]


# --- memory:// (in process: a memory filesystem is this process's own) ------------------

def test_memory_write_gives_the_local_bytes(idx_dir, tmp_path, memfs):
    import mnistconv
    ds = mnistconv.read(idx_dir)
    mnistconv.write(ds, tmp_path / "local.npz")
    files = mnistconv.write(ds, "memory://out/m.npz")
    assert [f.path for f in files] == ["memory://out/m.npz"]
    local = (tmp_path / "local.npz").read_bytes()
    assert memfs.cat("/out/m.npz") == local and files[0].sha256 == sha(local)
    assert memfs.ls("/out", detail=False) == ["/out/m.npz"]  # no temporary left


def test_memory_shard_set_and_directory_round_trip(idx_dir, tmp_path, memfs):
    import mnistconv
    ds = mnistconv.read(idx_dir)
    local = mnistconv.write(ds, tmp_path / "l.tfrecord", shards=2, preset="tfds")
    remote = mnistconv.write(ds, "memory://sets/l.tfrecord", shards=2, preset="tfds")
    assert [os.path.basename(f.path) for f in local] == \
        [f.path.rsplit("/", 1)[1] for f in remote]
    for lf, rf in zip(local, remote):
        assert memfs.cat(rf.path[len("memory://"):]) == Path(lf.path).read_bytes()
    # read back from memory:// (a writer's name finds its per-split shard sets), then
    # written as an IDX directory to memory:// and locally: the same bytes
    back = mnistconv.read("memory://sets/l.tfrecord")
    assert back.paths[0].startswith("memory://sets/l-")
    mnistconv.write(back, "memory://idx/")
    expected = mnistconv.write(mnistconv.read(tmp_path / "l.tfrecord", "tfrecord"),
                               tmp_path / "idx/")
    for f in expected:
        name = os.path.basename(f.path)
        assert memfs.cat(f"/idx/{name}") == Path(f.path).read_bytes()
    assert sorted(p.rsplit("/", 1)[1] for p in memfs.ls("/idx", detail=False)) == \
        sorted(os.path.basename(f.path) for f in expected)


def test_memory_existing_output_needs_force(idx_dir, memfs):
    import mnistconv
    ds = mnistconv.read(idx_dir)
    memfs.pipe("/o/m.npz", b"old")
    with pytest.raises(mnistconv.UsageError) as e:
        mnistconv.write(ds, "memory://o/m.npz")
    assert str(e.value) == "memory://o/m.npz: already exists; pass force=True to replace it"
    assert memfs.cat("/o/m.npz") == b"old"
    mnistconv.write(ds, "memory://o/m.npz", force=True)
    assert memfs.cat("/o/m.npz")[:2] == b"PK"


def test_memory_errors_name_the_remote_path(memfs):
    import mnistconv
    with pytest.raises(mnistconv.UsageError) as e:
        mnistconv.read("memory://nowhere/m.npz")
    assert str(e.value) == "memory://nowhere/m.npz: no such file or directory; check the path"
    memfs.pipe("/bad/train-images-idx3-ubyte", b"\x00\x00\x08\x03" + b"\x00" * 8)
    memfs.pipe("/bad/train-labels-idx1-ubyte", b"\x00\x00\x08\x01\x00\x00\x00\x00")
    with pytest.raises(mnistconv.MnistconvError) as e:
        mnistconv.read("memory://bad/")
    assert "memory://bad/train-images-idx3-ubyte" in str(e.value)
    assert "mnistconv-tmp" not in str(e.value)


def test_memory_failed_upload_leaves_nothing(idx_dir, memfs, monkeypatch):
    """A store without an atomic put gets a temporary name and a move: an upload cut
    half-way leaves neither the final name nor the temporary."""
    import mnistconv
    from fsspec.implementations.memory import MemoryFileSystem
    ds = mnistconv.read(idx_dir)

    def half_then_fail(self, lpath, rpath, **kwargs):
        data = Path(lpath).read_bytes()
        self.pipe_file(rpath, data[:len(data) // 2])
        raise ConnectionResetError("connection reset by peer")
    monkeypatch.setattr(MemoryFileSystem, "put_file", half_then_fail)
    with pytest.raises(mnistconv.MnistconvError) as e:
        mnistconv.write(ds, "memory://cut/m.npz")
    assert str(e.value) == ("memory://cut/m.npz: uploading failed: connection reset by "
                            "peer; check the URL, the network and the credentials, then "
                            "run again")
    assert not memfs.exists("/cut/m.npz")
    assert memfs.ls("/cut", detail=False) == [] if memfs.exists("/cut") else True


def test_spool_removed_with_the_dataset(idx_dir, memfs, tmp_path, monkeypatch):
    import gc
    import tempfile
    import mnistconv
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    mnistconv.write(mnistconv.read(idx_dir), "memory://s/m.npz")
    assert no_spools(tmp_path) == []  # the output's staging folder is gone
    ds = mnistconv.read("memory://s/m.npz")
    assert len(no_spools(tmp_path)) == 1
    split = ds.splits["train"]
    del ds
    gc.collect()
    assert len(no_spools(tmp_path)) == 1  # the split still reads from it
    assert sum(len(b.labels) for b in split.batches()) == 80
    del split
    gc.collect()
    assert no_spools(tmp_path) == []


# --- https:// (read) from a loopback HTTP server ----------------------------------------

@pytest.fixture
def http_root(tmp_path):
    root = tmp_path / "www"
    root.mkdir()
    handler = functools.partial(QuietHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield root, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def test_http_input_gives_the_local_bytes(idx_dir, http_root, tmp_path):
    pytest.importorskip("aiohttp")
    root, url = http_root
    assert run("convert", idx_dir, root / "m.npz", "-q").returncode == 0
    make_idx_dir(root / "idx", *small_digits(30, seed=3), "test", gz=True)
    spool_dir = tmp_path / "spool"
    spool_dir.mkdir()
    env = {"TMPDIR": str(spool_dir)}
    r = run("convert", f"{url}/m.npz", tmp_path / "remote.tfrecord", "--preset", "tfds",
            env=env)
    assert r.returncode == 0, stderr_of(r)
    assert "mnistconv-tmp" not in stderr_of(r)
    assert run("convert", root / "m.npz", tmp_path / "local.tfrecord", "--preset", "tfds",
               "-q").returncode == 0
    for split in ("train", "test"):
        assert (tmp_path / f"remote-{split}.tfrecord").read_bytes() == \
            (tmp_path / f"local-{split}.tfrecord").read_bytes()
    # a directory, as the server lists it
    r = run("convert", f"{url}/idx/", tmp_path / "d.npz", "-q", env=env)
    assert r.returncode == 0, stderr_of(r)
    assert run("convert", root / "idx", tmp_path / "dl.npz", "-q").returncode == 0
    assert (tmp_path / "d.npz").read_bytes() == (tmp_path / "dl.npz").read_bytes()
    # an IDX images file: its labels file beside it comes with it
    r = run("convert", f"{url}/idx/t10k-images-idx3-ubyte.gz", tmp_path / "f.npz", "-q",
            env=env)
    assert r.returncode == 0, stderr_of(r)
    assert (tmp_path / "f.npz").read_bytes() == (tmp_path / "dl.npz").read_bytes()
    assert no_spools(spool_dir) == []
    r = run("convert", f"{url}/missing.npz", tmp_path / "x.npz", env=env)
    assert (r.returncode, stderr_of(r)) == \
        (2, f"Error: {url}/missing.npz: no such file or directory; check the path\n")
    assert not (tmp_path / "x.npz").exists() and no_spools(spool_dir) == []


PEAK = ("import sys\nfrom mnistconv.cli import main\ntry:\n    main(sys.argv[1:])\n"
        "except SystemExit as e:\n    code = e.code\n"
        "peak = next(l.split()[1] for l in open('/proc/self/status')\n"
        "            if l.startswith('VmHWM:'))\n"
        "sys.stderr.write(f'VmHWM {peak}\\n')\nsys.exit(code)\n")


def peak_kb(*args, env=None):
    """The command's peak memory (VmHWM, KB), run as a child process."""
    r = subprocess.run([sys.executable, "-c", PEAK, *map(str, args)], capture_output=True,
                       env=dict(os.environ, PYTHONPATH=str(REPO), **(env or {})))
    assert r.returncode == 0, r.stderr
    last = r.stderr.decode().splitlines()[-1]
    assert last.startswith("VmHWM "), last
    return int(last.split()[1])


def big_idx_dir(folder, n):
    """An IDX pair of n random 28x28 images (n * 784 bytes), written 10000 at a time."""
    folder.mkdir()
    rng = np.random.default_rng(0)
    with open(folder / "train-images-idx3-ubyte", "wb") as f:
        f.write(b"\x00\x00\x08\x03" + b"".join(d.to_bytes(4, "big") for d in (n, 28, 28)))
        for start in range(0, n, 10_000):
            count = min(10_000, n - start)
            f.write(rng.integers(0, 256, (count, 28, 28), dtype=np.uint8).tobytes())
    (folder / "train-labels-idx1-ubyte").write_bytes(
        b"\x00\x00\x08\x01" + n.to_bytes(4, "big") + (np.arange(n) % 10).astype(
            np.uint8).tobytes())
    return folder


def test_http_input_memory_is_bounded(http_root, tmp_path):
    """A 118 MB remote IDX directory is copied in chunks: the command's peak memory
    (VmHWM) stays within 40 MB of reading the same files locally."""
    pytest.importorskip("aiohttp")
    root, url = http_root
    folder = big_idx_dir(root / "big", 150_000)
    env = {"TMPDIR": str(tmp_path)}
    local = peak_kb("info", folder, env=env)
    remote = peak_kb("info", f"{url}/big/", env=env)
    assert remote < local + 40 * 1024, (local, remote)


def test_https_output_is_refused_in_one_line(idx_dir, http_root, tmp_path):
    pytest.importorskip("aiohttp")
    root, url = http_root
    r = run("convert", idx_dir, f"{url}/m.npz")
    assert r.returncode == 1
    err = stderr_of(r)
    assert err.startswith(f"Error: {url}/m.npz: uploading failed: ") and \
        err.count("\n") == 1 and "Traceback" not in err
    assert not (root / "m.npz").exists()


def test_without_fsspec_one_line_exit_2(idx_dir, tmp_path):
    stub = tmp_path / "stub" / "fsspec"
    stub.mkdir(parents=True)
    (stub / "__init__.py").write_text("raise ImportError('No module named fsspec')\n")
    r = subprocess.run([sys.executable, "-m", "mnistconv", "convert", str(idx_dir),
                        "s3://bucket/m.npz"], capture_output=True,
                       env=dict(os.environ,
                                PYTHONPATH=f"{tmp_path / 'stub'}{os.pathsep}{REPO}"))
    assert (r.returncode, r.stderr.decode()) == (
        2, "Error: the remote path s3:// needs the Python package 'fsspec'; install it "
           "with: pip install 'mnistconv[remote]'\n")


def test_unknown_scheme_and_unreachable_host_one_line(idx_dir, tmp_path):
    r = run("convert", idx_dir, "foo://x/m.npz")
    assert (r.returncode, stderr_of(r)) == (
        2, "Error: foo://x/m.npz: not a path mnistconv can open (Protocol not known: "
           "foo); use a local path or a scheme fsspec knows (s3://, gs://, https://, "
           "memory://)\n")
    closed = socket.create_server(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there now
    r = run("convert", f"http://127.0.0.1:{port}/m.npz", tmp_path / "o.npz")
    err = stderr_of(r)
    assert r.returncode == 1 and err.count("\n") == 1, err
    assert err.startswith(f"Error: http://127.0.0.1:{port}/m.npz: reading failed: ") \
        and err.endswith("; check the URL, the network and the credentials, then run "
                         "again\n"), err
    assert not (tmp_path / "o.npz").exists()


def test_sha256sums_refused_for_a_remote_output(idx_dir, tmp_path):
    r = run("convert", idx_dir, "memory://x/m.npz", "--sha256sums", cwd=tmp_path)
    assert (r.returncode, stderr_of(r)) == \
        (2, "Error: memory://x/m.npz: --sha256sums needs a local output; write to a "
            "local path, or drop --sha256sums\n")
    assert os.listdir(tmp_path) == ["src"]  # no local s3:/ or memory:/ folder


# --- s3:// through moto's S3 server on 127.0.0.1 ---------------------------------------

def s3_env(endpoint):
    """How users point mnistconv at an S3-compatible server: fsspec's own configuration
    variables (FSSPEC_<PROTOCOL>_<ARGUMENT>) and the usual AWS credentials."""
    return {"FSSPEC_S3_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}


def test_s3_shard_set_written_and_read_back(idx_dir, s3_server, bucket, tmp_path):
    fs, name = bucket
    env = s3_env(s3_server)
    r = run("convert", idx_dir, f"s3://{name}/sets/m.tfrecord", "--shards", "3",
            "--preset", "tfds", "--workers", "1", env=env)
    assert r.returncode == 0, stderr_of(r)
    assert run("convert", idx_dir, tmp_path / "m.tfrecord", "--shards", "3", "--preset",
               "tfds", "--workers", "1", "-q").returncode == 0
    local = sorted(p.name for p in tmp_path.iterdir() if ".tfrecord-" in p.name)
    assert len(local) == 6
    fs.invalidate_cache()
    assert sorted(p.rsplit("/", 1)[1] for p in fs.find(f"{name}/sets")) == local
    for shard in local:
        data = fs.cat(f"{name}/sets/{shard}")
        assert data == (tmp_path / shard).read_bytes()
        assert f"s3://{name}/sets/{shard}  {len(data):,} bytes  sha256 {sha(data)}" \
            in stderr_of(r)
    # read back from the bucket: the same dataset as the local shard set
    r = run("convert", f"s3://{name}/sets/m.tfrecord", tmp_path / "back.npz", "-q",
            env=env)
    assert r.returncode == 0, stderr_of(r)
    assert run("convert", tmp_path / "m.tfrecord", tmp_path / "local.npz", "--from",
               "tfrecord", "-q").returncode == 0
    assert (tmp_path / "back.npz").read_bytes() == (tmp_path / "local.npz").read_bytes()
    # an existing object is refused without --force, replaced with it
    r = run("convert", idx_dir, f"s3://{name}/sets/m.tfrecord", "--shards", "3",
            "--preset", "tfds", env=env)
    assert (r.returncode, stderr_of(r)) == (
        2, f"Error: s3://{name}/sets/m-train.tfrecord-00000-of-00003: already exists; use "
           "--force to overwrite it\n")
    r = run("convert", idx_dir, f"s3://{name}/sets/m.tfrecord", "--shards", "3",
            "--preset", "tfds", "--force", "-q", env=env)
    assert r.returncode == 0, stderr_of(r)


class CuttingProxy:
    """A TCP proxy in front of the S3 server that drops any connection once the client
    has sent more than `limit` bytes on it: an upload cut half-way, every retry too."""

    def __init__(self, target, limit):
        host, port = target.rsplit("/", 1)[1].split(":")
        self.target, self.limit = (host, int(port)), limit
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.cut = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            threading.Thread(target=self._pipe, args=(client, upstream, True),
                             daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, False),
                             daemon=True).start()

    def _pipe(self, src, dst, counted):
        sent = 0
        try:
            while data := src.recv(65536):
                sent += len(data)
                if counted and sent > self.limit:
                    self.cut += 1
                    dst.sendall(data[:len(data) // 2])
                    break
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def close(self):
        self.listener.close()


@pytest.mark.parametrize("count, limit", [(120, 30_000), (12_000, 3_000_000)],
                         ids=["one-put", "multipart"])
def test_s3_upload_cut_half_way_leaves_no_object(count, limit, s3_server, bucket,
                                                 tmp_path):
    """The connection drops part-way through the upload (every retry too): a single
    PUT (95 KB) and a multipart upload (9.4 MB, parts of 8 MB) leave no object, and
    the unfinished multipart upload is aborted (no parts kept on the server)."""
    fs, name = bucket
    source = make_idx_dir(tmp_path / "src", *small_digits(count, seed=5), "train")
    proxy = CuttingProxy(s3_server, limit=limit)
    try:
        env = dict(s3_env(proxy.url), AWS_MAX_ATTEMPTS="2")
        r = run("convert", source, f"s3://{name}/cut/m.npz", env=env)
    finally:
        proxy.close()
    err = stderr_of(r)
    assert r.returncode == 1 and proxy.cut >= 1, err
    assert err.startswith(f"Error: s3://{name}/cut/m.npz: uploading failed: ") and \
        err.endswith("; check the URL, the network and the credentials, then run "
                     "again\n") and err.count("\n") == 1, err
    fs.invalidate_cache()
    assert fs.find(name) == []  # no object at all, under the final name or another
    uploads = fs.call_s3("list_multipart_uploads", Bucket=name)
    assert uploads.get("Uploads", []) == []


def test_s3_killed_upload_leaves_no_object(idx_dir, s3_server, bucket, tmp_path):
    """kill -9 while the object's bytes are on the wire: the server never completes
    the PUT, so no object appears."""
    fs, name = bucket
    proxy = CuttingProxy(s3_server, limit=1 << 40)
    started = threading.Event()
    original = proxy._pipe

    def slow_pipe(src, dst, counted):  # hold the upload's bytes until the kill
        if counted:
            first = src.recv(65536)
            dst.sendall(first[:len(first) // 2])
            if b"PUT " in first:
                started.set()
                threading.Event().wait(30)
                return
            dst.sendall(first[len(first) // 2:])
        original(src, dst, counted)
    proxy._pipe = slow_pipe
    full_env = dict(os.environ, **s3_env(proxy.url), PYTHONPATH=str(REPO),
                    TMPDIR=str(tmp_path))
    child = subprocess.Popen([sys.executable, "-m", "mnistconv", "convert", str(idx_dir),
                              f"s3://{name}/kill/m.npz"], env=full_env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert started.wait(60)
        child.kill()
        child.wait()
    finally:
        proxy.close()
    fs.invalidate_cache()
    assert fs.find(name) == []
    # the killed run's local staging folder is left; the next run removes it
    assert len(no_spools(tmp_path)) == 1
    r = run("convert", idx_dir, f"s3://{name}/kill/m.npz", "-q",
            env=dict(s3_env(s3_server), TMPDIR=str(tmp_path)))
    assert r.returncode == 0, stderr_of(r)
    assert no_spools(tmp_path) == []
    fs.invalidate_cache()
    assert fs.find(name) == [f"{name}/kill/m.npz"]


def test_s3_input_memory_is_bounded(s3_server, bucket, tmp_path):
    """A 63 MB IDX directory read from the bucket: the command's peak memory (VmHWM)
    stays within 30 MB of reading a 10-image dataset from the same bucket (the S3
    client's own imports)."""
    fs, name = bucket
    folder = big_idx_dir(tmp_path / "big", 80_000)
    fs.put(str(folder) + "/", f"{name}/big/", recursive=True)
    small = big_idx_dir(tmp_path / "small", 10)
    fs.put(str(small) + "/", f"{name}/small/", recursive=True)
    fs.invalidate_cache()
    assert sorted(fs.ls(f"{name}/big", detail=False)) == \
        [f"{name}/big/train-images-idx3-ubyte", f"{name}/big/train-labels-idx1-ubyte"]
    env = dict(s3_env(s3_server), TMPDIR=str(tmp_path))
    baseline = peak_kb("info", f"s3://{name}/small/", env=env)
    remote = peak_kb("info", f"s3://{name}/big/", env=env)
    assert remote < baseline + 30 * 1024, (baseline, remote)
    assert no_spools(tmp_path) == []
