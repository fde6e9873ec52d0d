"""`mnistconv download` against local HTTP servers on 127.0.0.1 only.

The servers serve generated IDX files (or the official MNIST files from ../shared when
present) and misbehave on request: cut the connection half-way, serve wrong bytes, 404,
stall. A refused connection is a port on 127.0.0.1 that nothing listens on. The real
catalogue's published checksums describe bytes no test can have (the network is closed),
so the tests pass the library a Family built from the served files' digests; the CLI
tests put that family in the catalogue's place with monkeypatch, and the tests that keep
the real catalogue expect its checksums to reject what the local server serves.
"""

import dataclasses
import gzip
import hashlib
import http.server
import io
import os
import socket
import struct
import subprocess
import sys
import threading
import zipfile
from pathlib import Path

import numpy as np
import pytest

from mnistconv.family import download as dl
from helpers import run_main as run_cli
from mnistconv.errors import MnistconvError, UsageError
from mnistconv.io.fileio import STAGING_MARK
from mnistconv.model.records import Progress

REPO = Path(__file__).resolve().parents[1]
SHARED_MNIST = Path(__file__).resolve().parents[2] / "shared" / "data" / "mnist"
# What a refused copy's message advises (download.py's hint for wrong bytes).
ADVICE = ("; point --base-url at a copy of the published files (or of their data "
          "recompressed), or leave it out to fetch from the publishers")
IDX_NAMES = ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
             "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")
# SHA-256 of the decompressed official files (the MNIST database as published).
OFFICIAL_IDX_SHA256 = {
    "train-images-idx3-ubyte": "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db",
    "train-labels-idx1-ubyte": "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5",
    "t10k-images-idx3-ubyte": "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7",
    "t10k-labels-idx1-ubyte": "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2",
}


# --- generated data -----------------------------------------------------------------------

def idx_bytes(array):
    array = np.ascontiguousarray(array, dtype=np.uint8)
    header = struct.pack(">HBB", 0, 8, array.ndim) + struct.pack(f">{array.ndim}I",
                                                                   *array.shape)
    return header + array.tobytes()


def generated_files(n_train=30, n_test=10):
    rng = np.random.default_rng(7)
    out = {}
    for split, n in (("train", n_train), ("t10k", n_test)):
        images = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
        labels = (np.arange(n) % 10).astype(np.uint8)
        out[f"{split}-images-idx3-ubyte.gz"] = gzip.compress(idx_bytes(images), 9, mtime=0)
        out[f"{split}-labels-idx1-ubyte.gz"] = gzip.compress(idx_bytes(labels), 9, mtime=0)
    return out


def spec_for(name, data, md5_only=False):
    return dl.RemoteFile(name, hashlib.md5(data).hexdigest(),
                         None if md5_only else hashlib.sha256(data).hexdigest(), len(data))


def family_for(served, base_url, **changes):
    fam = dl.Family("test", "generated test data", "http://127.0.0.1/", (base_url,),
                    tuple(spec_for(name, data) for name, data in served.items()))
    return dataclasses.replace(fam, **changes)


# --- the local server ------------------------------------------------------------------

class Server:
    """A threaded HTTP server on 127.0.0.1. `files` maps a path (without the leading
    slash) to bytes; `behaviour` maps a path to one of:
      "cut"            send the full Content-Length, half the body, then close
      ("cut", n)       cut the first n requests, serve the rest whole
      "wrong"          serve other bytes of the same length
      "stall"          send half the body, then wait until the server stops
      "drip"           send the body a byte every 50 ms (for at most 8 s, then close)
    Missing paths get 404. Every request is recorded as (path, headers)."""

    def __init__(self, files=None, behaviour=None):
        self.files = dict(files or {})
        self.behaviour = dict(behaviour or {})
        self.requests = []
        self.stop = threading.Event()
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                path = self.path.lstrip("/")
                server.requests.append((path, dict(self.headers)))
                data = server.files.get(path)
                if data is None:
                    self.send_error(404, "Not Found")
                    return
                how = server.behaviour.get(path)
                if isinstance(how, tuple) and how[0] == "cut":
                    served = sum(1 for p, _ in server.requests if p == path)
                    how = "cut" if served <= how[1] else None
                if how == "wrong":
                    data = bytes(b ^ 0x55 for b in data)
                self.send_response(200)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if how == "cut":
                    self.wfile.write(data[: len(data) // 2])
                    self.wfile.flush()
                    self.connection.shutdown(socket.SHUT_RDWR)
                    self.close_connection = True
                elif how == "drip":
                    for i in range(min(len(data), 160)):
                        self.wfile.write(data[i:i + 1])
                        self.wfile.flush()
                        if server.stop.wait(0.05):
                            break
                    self.close_connection = True
                elif how == "stall":
                    self.wfile.write(data[: len(data) // 2])
                    self.wfile.flush()
                    server.stop.wait(30)
                else:
                    self.wfile.write(data)

        class Quiet(http.server.ThreadingHTTPServer):
            def handle_error(self, request, client_address):
                pass  # a client that went away mid-body (after a mismatch) is expected

        self.httpd = Quiet(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever,
                                       kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def count(self, path):
        return sum(1 for p, _ in self.requests if p == path)

    def close(self):
        self.stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def serve():
    servers = []

    def start(files=None, behaviour=None):
        s = Server(files, behaviour)
        servers.append(s)
        return s

    yield start
    for s in servers:
        s.close()


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch):
    # A proxy from the environment would carry 127.0.0.1 requests elsewhere.
    for var in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy",
                "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.delenv("MNISTCONV_BASE_URL", raising=False)


REAL_FAMILIES = dict(dl.FAMILIES)


@pytest.fixture(autouse=True)
def local_mirrors_only(monkeypatch):
    """In-process, the catalogue's mirrors point at 127.0.0.1:1 (nothing listens there),
    so a test that forgot --base-url fails instead of reaching the internet."""
    for name, fam in REAL_FAMILIES.items():
        monkeypatch.setitem(dl.FAMILIES, name,
                            dataclasses.replace(fam, mirrors=("http://127.0.0.1:1",)))


@pytest.fixture
def closed_port():
    """A port on 127.0.0.1 with nothing listening: connections are refused."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def staging_leftovers(root):
    return [os.path.join(d, f) for d, dirs, files in os.walk(root)
            for f in files + dirs if STAGING_MARK in f]


class Recorder(Progress):
    def __init__(self):
        self.events = []

    def start(self, description, total):
        self.events.append(["start", description, total, 0])

    def advance(self, n):
        self.events[-1][3] += n

    def finish(self):
        self.events.append(["finish"])


def download_error(*args, kind=MnistconvError, **options):
    """The message of the error dl.download(*args, **options) raises."""
    with pytest.raises(kind) as e:
        dl.download(*args, **options)
    return str(e.value)


# --- the library ------------------------------------------------------------------------

def test_download_success_verifies_and_reports_bytes(serve, tmp_path):
    files = generated_files()
    server = serve(files)
    progress = Recorder()
    target = tmp_path / "data"
    results = dl.download(family_for(files, server.url), target, progress=progress,
                          retry_delay=0)
    assert [r.action for r in results] == ["downloaded"] * 4
    for r, (name, data) in zip(results, files.items()):
        assert Path(r.path) == target / name
        assert (target / name).read_bytes() == data
        assert r.bytes == len(data)
        assert r.sha256 == hashlib.sha256(data).hexdigest()
        assert r.url == f"{server.url}/{name}"
    starts = [e for e in progress.events if e[0] == "start"]
    assert [(e[1], e[2], e[3]) for e in starts] == [
        (name, len(data), len(data)) for name, data in files.items()]
    assert sorted(os.listdir(target)) == sorted(files)
    # The transfer asks for the stored bytes, never a re-encoding of them.
    assert all(h.get("Accept-Encoding") == "identity" for _, h in server.requests)


def test_present_and_valid_files_are_not_fetched_again(serve, tmp_path):
    files = generated_files()
    server = serve(files)
    fam = family_for(files, server.url)
    dl.download(fam, tmp_path, retry_delay=0)
    os.unlink(tmp_path / "t10k-labels-idx1-ubyte.gz")
    results = dl.download(fam, tmp_path, retry_delay=0)
    assert [r.action for r in results] == ["present", "present", "present", "downloaded"]
    assert [server.count(n) for n in files] == [1, 1, 1, 2]


def test_cut_connection_is_retried_from_the_start(serve, tmp_path):
    files = generated_files()
    name = "train-images-idx3-ubyte.gz"
    server = serve(files, {name: ("cut", 2)})
    results = dl.download(family_for(files, server.url), tmp_path, retries=2, retry_delay=0)
    assert results[0].action == "downloaded"
    assert (tmp_path / name).read_bytes() == files[name]
    assert server.count(name) == 3
    # Resume-free: every attempt asked for the whole file.
    assert all("Range" not in h for p, h in server.requests if p == name)
    assert staging_leftovers(tmp_path) == []


def test_cut_connection_every_time_fails_and_leaves_nothing(serve, tmp_path):
    files = generated_files()
    name = "train-images-idx3-ubyte.gz"
    server = serve(files, {name: "cut"})
    target = tmp_path / "data"
    size = len(files[name])
    assert download_error(family_for(files, server.url), target, retries=2,
                          retry_delay=0) == (
        f"{server.url}/{name}: truncated transfer: the connection closed after "
        f"{size // 2} of {size} bytes (3 attempts); nothing was saved; try again, "
        f"or raise --retries")
    assert server.count(name) == 3
    assert not target.exists()  # made for the download, removed when it failed


def test_checksum_mismatch_names_file_and_digests(serve, tmp_path):
    files = generated_files()
    name = "train-labels-idx1-ubyte.gz"
    server = serve(files, {name: "wrong"})
    fam = family_for(files, server.url)
    wrong = bytes(b ^ 0x55 for b in files[name])
    assert download_error(fam, tmp_path, retry_delay=0) == (
        f"{server.url}/{name}: checksum mismatch: expected sha256 "
        f"{hashlib.sha256(files[name]).hexdigest()}, got {hashlib.sha256(wrong).hexdigest()}"
        f"; nothing was saved: the mirror serves different bytes from the ones published"
        f"{ADVICE}")
    assert server.count(name) == 1  # wrong bytes are not retried on the same mirror
    # The file before it was complete and verified, so it stays; the bad one does not.
    assert os.listdir(tmp_path) == ["train-images-idx3-ubyte.gz"]


def test_md5_only_catalogue_entry_is_checked(serve, tmp_path):
    files = {"train-labels-idx1-ubyte.gz": generated_files()["train-labels-idx1-ubyte.gz"]}
    server = serve(files)
    spec = dataclasses.replace(spec_for("train-labels-idx1-ubyte.gz", files[
        "train-labels-idx1-ubyte.gz"], md5_only=True), md5="0" * 32)
    fam = family_for(files, server.url, files=(spec,))
    with pytest.raises(MnistconvError, match="checksum mismatch: expected md5 0{32}, got"):
        dl.download(fam, tmp_path, retry_delay=0)
    assert os.listdir(tmp_path) == []


def test_404_and_refused_fall_through_to_the_next_mirror(serve, tmp_path, closed_port):
    files = generated_files()
    empty = serve({})
    good = serve(files)
    mirrors = (f"http://127.0.0.1:{closed_port}/", empty.url, good.url + "/")
    results = dl.download(family_for(files, good.url), tmp_path, base_urls=mirrors,
                          retry_delay=0)
    assert [r.url for r in results] == [f"{good.url}/{n}" for n in files]
    assert [empty.count(n) for n in files] == [1, 1, 1, 1]


def test_default_mirrors_offline_is_one_line(tmp_path, capsys, closed_port):
    url = f"http://127.0.0.1:{closed_port}"
    dl.FAMILIES["kmnist"] = dataclasses.replace(dl.FAMILIES["kmnist"],
                                                mirrors=(url, url + "/again"))
    code, out, err = run_cli(capsys, "download", "kmnist", tmp_path / "k", "--retries", "0")
    assert (code, out) == (1, "")
    assert err == (f"Error: train-images-idx3-ubyte.gz: connection refused for every mirror "
                   f"({url}/train-images-idx3-ubyte.gz, {url}/again/train-images-idx3-ubyte.gz)"
                   f"; nothing was saved; check the network connection, or point --base-url "
                   f"(or MNISTCONV_BASE_URL) at a reachable mirror\n")
    assert not (tmp_path / "k").exists()


def test_every_mirror_failing_is_one_line_listing_them(serve, tmp_path, closed_port):
    files = generated_files()
    empty = serve({})
    name = "train-images-idx3-ubyte.gz"
    refused = f"http://127.0.0.1:{closed_port}"
    assert download_error(family_for(files, empty.url), tmp_path,
                          base_urls=(refused, empty.url), retry_delay=0) == (
        f"{name}: no mirror could provide it ({refused}/{name}: connection refused, "
        f"{empty.url}/{name}: HTTP 404 Not Found); nothing was saved; check --base-url "
        f"(or MNISTCONV_BASE_URL)")
    assert os.listdir(tmp_path) == []


def test_stalled_server_times_out(serve, tmp_path):
    files = generated_files()
    name = "train-images-idx3-ubyte.gz"
    server = serve(files, {name: "stall"})
    assert download_error(family_for(files, server.url), tmp_path, timeout=0.3, retries=1,
                          retry_delay=0) == (
        f"{server.url}/{name}: timed out: nothing received for 0.3 s (2 attempts); "
        f"nothing was saved; check the network connection, or point --base-url (or "
        f"MNISTCONV_BASE_URL) at a reachable mirror")
    assert server.count(name) == 2
    assert staging_leftovers(tmp_path) == []


def test_a_dripping_server_times_out(serve, tmp_path):
    """Issue 35: a byte at a time within each timeout kept a download alive for ever
    (each receive reset the socket's timeout). Progress is bytes a second over a window
    of the timeout: 20 bytes/s is under it, so each attempt ends after about 0.5 s."""
    import re
    import time
    files = generated_files()
    name = "train-images-idx3-ubyte.gz"
    server = serve(files, {name: "drip"})
    start = time.monotonic()
    message = download_error(family_for(files, server.url), tmp_path, timeout=0.5,
                             retries=1, retry_delay=0)
    took = time.monotonic() - start
    assert re.fullmatch(
        rf"{re.escape(server.url)}/{name}: timed out: under 1,024 bytes/s: \d+ bytes in "
        r"0\.5 s \(2 attempts\); nothing was saved; .*", message), message
    assert took < 4, took
    assert server.count(name) == 2
    assert staging_leftovers(tmp_path) == []


def test_size_differing_from_the_published_one_is_refused_before_the_body(serve, tmp_path):
    files = generated_files()
    name = "train-images-idx3-ubyte.gz"
    server = serve(files)
    fam = family_for(files, server.url)
    wrong_size = dataclasses.replace(fam.files[0], size=len(files[name]) + 1)
    fam = dataclasses.replace(fam, files=(wrong_size,) + fam.files[1:])
    assert download_error(fam, tmp_path, retry_delay=0) == (
        f"{server.url}/{name}: the mirror offers {len(files[name])} bytes, the published "
        f"file has {len(files[name]) + 1}; nothing was saved: the mirror serves different "
        f"bytes from the ones published{ADVICE}")
    assert os.listdir(tmp_path) == []


def test_present_file_that_does_not_match_is_refused_without_force(serve, tmp_path):
    files = generated_files()
    server = serve(files)
    fam = family_for(files, server.url)
    name = "t10k-images-idx3-ubyte.gz"
    (tmp_path / name).write_bytes(b"not the file")
    assert download_error(fam, tmp_path, retry_delay=0, kind=UsageError) == (
        f"{tmp_path / name}: exists and is not the published file (checksum mismatch: "
        f"expected sha256 {hashlib.sha256(files[name]).hexdigest()}, got "
        f"{hashlib.sha256(b'not the file').hexdigest()}); use --force to replace it")
    assert server.requests == []  # refused before anything was fetched
    results = dl.download(fam, tmp_path, force=True, retry_delay=0)
    assert [r.action for r in results] == ["downloaded"] * 4
    assert (tmp_path / name).read_bytes() == files[name]


def test_verify_reports_each_file(tmp_path):
    files = generated_files()
    fam = family_for(files, "http://127.0.0.1:9")
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    assert [r.action for r in dl.verify(fam, tmp_path)] == ["verified"] * 4
    os.unlink(tmp_path / "train-labels-idx1-ubyte.gz")
    (tmp_path / "t10k-labels-idx1-ubyte.gz").write_bytes(b"x")
    results = dl.verify(fam, tmp_path)
    assert [r.action for r in results] == ["verified", "missing", "verified", "invalid"]
    assert results[3].problem.startswith("checksum mismatch: expected sha256 ")


def test_get_family_names():
    assert dl.get_family("MNIST").name == "mnist"
    assert dl.get_family("fashion_mnist").name == "fashion-mnist"
    assert dl.get_family("CIFAR-10").name == "cifar10"
    with pytest.raises(UsageError, match="unknown dataset 'cifar'; choose one of: mnist, "
                                         "fashion-mnist, kmnist, emnist, cifar10, "):
        dl.get_family("cifar")


def test_catalogue_is_complete():
    for fam in REAL_FAMILIES.values():
        assert fam.mirrors and fam.checksums_from
        for spec in fam.files:
            assert spec.md5 and len(spec.md5) == 32
    mnist = REAL_FAMILIES["mnist"]
    assert [s.name for s in mnist.files] == list(IDX_NAMES)
    assert mnist.mirrors[0] == "https://ossci-datasets.s3.amazonaws.com/mnist"


def test_mnist_catalogue_matches_the_manifest():
    manifest = REPO.parent / "shared" / "specs" / "browser-v1-manifest.json"
    if not manifest.exists():
        pytest.skip("../shared/specs is not present")
    import json
    published = json.loads(manifest.read_text())["split_provenance"]["files"]
    for spec in REAL_FAMILIES["mnist"].files:
        entry = published[spec.name]
        assert (spec.md5, spec.sha256, spec.size) == (entry["md5"], entry["sha256"],
                                                     entry["bytes"])
        assert entry["url"] == f"{REAL_FAMILIES['mnist'].mirrors[0]}/{spec.name}"


# --- EMNIST's archive ------------------------------------------------------------------------

def emnist_zip():
    buffer = io.BytesIO()
    gen = generated_files(20, 10)
    members = {}
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
        for split in ("digits", "letters"):
            for name, data in gen.items():
                member = f"gzip/emnist-{split}-{name.replace('t10k', 'test')}"
                z.writestr(member, data)
                members[member] = data
            # The generated labels are 0..9: a mapping naming them all (a digit's code).
            z.writestr(f"gzip/emnist-{split}-mapping.txt",
                       "".join(f"{i} {48 + i}\n" for i in range(10)))
        z.writestr("gzip/README", "not extracted")
    return buffer.getvalue(), members


def test_emnist_archive_is_verified_then_extracted_per_split(serve, tmp_path):
    archive, members = emnist_zip()
    server = serve({"gzip.zip": archive})
    fam = dataclasses.replace(dl.FAMILIES["emnist"], mirrors=(server.url,),
                              files=(spec_for("gzip.zip", archive, md5_only=True),))
    results = dl.download(fam, tmp_path, retry_delay=0)
    assert [r.action for r in results] == ["downloaded"] + ["extracted"] * 10
    for member, data in members.items():
        base = member.split("/")[-1]
        split = base.split("-")[1]
        assert (tmp_path / split / base).read_bytes() == data
    assert (tmp_path / "digits" / "emnist-digits-mapping.txt").read_text() == \
        "".join(f"{i} {48 + i}\n" for i in range(10))
    assert sorted(os.listdir(tmp_path)) == ["digits", "gzip.zip", "letters"]

    # A lost member is restored from the verified archive, without a download.
    lost = tmp_path / "letters" / "emnist-letters-test-images-idx3-ubyte.gz"
    os.unlink(lost)
    again = dl.download(fam, tmp_path, retry_delay=0)
    assert [r.action for r in again].count("extracted") == 1
    assert server.count("gzip.zip") == 1
    assert lost.exists()

    # verify checks the members against the archive's CRC-32.
    damaged = bytearray(lost.read_bytes())
    damaged[20] ^= 0xFF
    lost.write_bytes(bytes(damaged))
    bad = [r for r in dl.verify(fam, tmp_path) if r.action != "verified"]
    assert len(bad) == 1 and bad[0].path == str(lost)
    assert bad[0].problem.startswith("checksum mismatch: expected crc32 ")


def test_emnist_archive_with_wrong_checksum_is_not_extracted(serve, tmp_path):
    archive, _ = emnist_zip()
    server = serve({"gzip.zip": archive}, {"gzip.zip": "wrong"})
    fam = dataclasses.replace(dl.FAMILIES["emnist"], mirrors=(server.url,),
                              files=(spec_for("gzip.zip", archive, md5_only=True),))
    with pytest.raises(MnistconvError, match="gzip.zip: checksum mismatch: expected md5 "):
        dl.download(fam, tmp_path / "emnist", retry_delay=0)
    assert not (tmp_path / "emnist").exists()


# --- the command line ----------------------------------------------------------------------

@pytest.fixture
def test_mnist(monkeypatch):
    """Put a catalogue entry describing the generated files in MNIST's place."""
    files = generated_files()
    fam = dataclasses.replace(dl.FAMILIES["mnist"], files=tuple(
        spec_for(n, d) for n, d in files.items()))
    monkeypatch.setitem(dl.FAMILIES, "mnist", fam)
    return files


def test_cli_download_then_verify(serve, tmp_path, capsys, test_mnist):
    server = serve(test_mnist)
    out_dir = tmp_path / "data"
    code, out, err = run_cli(capsys, "download", "mnist", out_dir, "--base-url", server.url)
    assert (code, out) == (0, "")
    assert "downloaded train-images-idx3-ubyte.gz" in err
    assert f"Next: mnistconv idx-to-npz {out_dir} mnist.npz" in err
    for name, data in test_mnist.items():
        assert (out_dir / name).read_bytes() == data

    code, out, err = run_cli(capsys, "download", "mnist", out_dir, "--base-url", server.url,
                             "--json")
    assert code == 0
    import json
    summary = json.loads(out)
    assert [f["action"] for f in summary["files"]] == ["present"] * 4
    assert summary["files"][0]["sha256"] == hashlib.sha256(
        test_mnist["train-images-idx3-ubyte.gz"]).hexdigest()
    assert len(server.requests) == 4

    code, out, err = run_cli(capsys, "download", "mnist", out_dir, "--verify-only", "-q")
    assert (code, out, err) == (0, "", "")


def test_cli_base_url_from_environment(serve, tmp_path, capsys, test_mnist, monkeypatch):
    server = serve(test_mnist)
    monkeypatch.setenv("MNISTCONV_BASE_URL", server.url)
    code, _, err = run_cli(capsys, "download", "mnist", tmp_path, "-q")
    assert (code, err) == (0, "")
    assert len(server.requests) == 4


def test_cli_verify_only_names_the_bad_file(tmp_path, capsys, test_mnist):
    for name, data in test_mnist.items():
        (tmp_path / name).write_bytes(data)
    name = "train-labels-idx1-ubyte.gz"
    (tmp_path / name).write_bytes(b"junk")
    code, out, err = run_cli(capsys, "download", "mnist", tmp_path, "--verify-only")
    assert code == 1 and out == ""
    expected = hashlib.sha256(test_mnist[name]).hexdigest()
    actual = hashlib.sha256(b"junk").hexdigest()
    assert err.splitlines()[-1] == (
        f"Error: {tmp_path / name}: checksum mismatch: expected sha256 {expected}, got "
        f"{actual}; run: mnistconv download mnist {tmp_path} --force")
    assert "ok       train-images-idx3-ubyte.gz" in err
    os.unlink(tmp_path / "t10k-images-idx3-ubyte.gz")
    code, _, err = run_cli(capsys, "download", "mnist", tmp_path, "--verify-only", "-q")
    assert code == 1
    assert err == (f"Error: {tmp_path / name}: checksum mismatch: expected sha256 {expected}, "
                   f"got {actual} (and 1 more file(s) missing or not valid); run: mnistconv "
                   f"download mnist {tmp_path} --force\n")


def test_cli_truncated_transfer(serve, tmp_path, capsys, test_mnist):
    name = "train-images-idx3-ubyte.gz"
    server = serve(test_mnist, {name: "cut"})
    out_dir = tmp_path / "data"
    code, out, err = run_cli(capsys, "download", "mnist", out_dir, "--base-url", server.url,
                             "--retries", "0")
    size = len(test_mnist[name])
    assert (code, out) == (1, "")
    assert err == (f"Error: {server.url}/{name}: truncated transfer: the connection closed "
                   f"after {size // 2} of {size} bytes; nothing was saved; try again, or "
                   f"raise --retries\n")
    assert not out_dir.exists()


def test_cli_cut_then_retried(serve, tmp_path, capsys, test_mnist):
    name = "t10k-images-idx3-ubyte.gz"
    server = serve(test_mnist, {name: ("cut", 1)})
    # The default back-off before a retry is 1 s; one retry keeps the test short.
    code, _, err = run_cli(capsys, "download", "mnist", tmp_path, "--base-url", server.url,
                           "--retries", "1", "-q")
    assert (code, err) == (0, "")
    assert server.count(name) == 2
    assert (tmp_path / name).read_bytes() == test_mnist[name]
    assert sorted(os.listdir(tmp_path)) == sorted(test_mnist)


def test_cli_wrong_bytes(serve, tmp_path, capsys, test_mnist):
    name = "train-labels-idx1-ubyte.gz"
    server = serve(test_mnist, {name: "wrong"})
    code, out, err = run_cli(capsys, "download", "mnist", tmp_path, "--base-url", server.url,
                             "-q")
    wrong = bytes(b ^ 0x55 for b in test_mnist[name])
    assert (code, out) == (1, "")
    assert err == (f"Error: {server.url}/{name}: checksum mismatch: expected sha256 "
                   f"{hashlib.sha256(test_mnist[name]).hexdigest()}, got "
                   f"{hashlib.sha256(wrong).hexdigest()}; nothing was saved: the mirror "
                   f"serves different bytes from the ones published{ADVICE}\n")
    assert os.listdir(tmp_path) == ["train-images-idx3-ubyte.gz"]  # verified before it


def test_cli_404(serve, tmp_path, capsys, test_mnist):
    server = serve({})
    code, out, err = run_cli(capsys, "download", "mnist", tmp_path / "d", "--base-url",
                             server.url + "/mnist/")
    assert (code, out) == (1, "")
    assert err == (f"Error: {server.url}/mnist/train-images-idx3-ubyte.gz: HTTP 404 Not "
                   f"Found; nothing was saved; check --base-url (or MNISTCONV_BASE_URL)\n")
    assert not (tmp_path / "d").exists()


def test_cli_existing_invalid_file_needs_force(serve, tmp_path, capsys, test_mnist):
    server = serve(test_mnist)
    (tmp_path / "train-images-idx3-ubyte.gz").write_bytes(b"")
    code, _, err = run_cli(capsys, "download", "mnist", tmp_path, "--base-url", server.url)
    assert code == 2
    assert err.startswith(f"Error: {tmp_path / 'train-images-idx3-ubyte.gz'}: exists and is "
                          f"not the published file (checksum mismatch: expected sha256 ")
    assert err.endswith("; use --force to replace it\n")
    code, _, _ = run_cli(capsys, "download", "mnist", tmp_path, "--base-url", server.url,
                         "--force", "-q")
    assert code == 0
    assert (tmp_path / "train-images-idx3-ubyte.gz").read_bytes() == test_mnist[
        "train-images-idx3-ubyte.gz"]


def test_cli_usage_errors(capsys, tmp_path):
    code, _, err = run_cli(capsys, "download", "cifar", tmp_path)
    assert code == 2
    assert err == ("Error: unknown dataset 'cifar'; choose one of: mnist, fashion-mnist, kmnist, emnist, cifar10, cifar100, svhn, pathmnist, chestmnist, dermamnist, octmnist, pneumoniamnist, retinamnist, breastmnist, bloodmnist, tissuemnist, organamnist, organcmnist, organsmnist\n")
    code, _, err = run_cli(capsys, "download", "mnist")
    assert code == 2
    assert err == ("Error: expected NAME and DIRECTORY; for example: mnistconv download "
                   "mnist data/ (or --list)\n")
    code, _, err = run_cli(capsys, "download", "mnist", tmp_path, "--retries", "-1")
    assert code == 2


def test_cli_list(capsys):
    code, out, _ = run_cli(capsys, "download", "--list")
    assert code == 0
    names = [line.split()[0] for line in out.splitlines() if not line.startswith(" ")]
    assert names == "mnist, fashion-mnist, kmnist, emnist, cifar10, cifar100, svhn, pathmnist, chestmnist, dermamnist, octmnist, pneumoniamnist, retinamnist, breastmnist, bloodmnist, tissuemnist, organamnist, organcmnist, organsmnist".split(", ")
    assert "4 file(s), 11.6 MB" in out
    code, out, _ = run_cli(capsys, "download", "--list", "--json")
    import json
    listing = json.loads(out)
    assert listing[0]["files"][0] == {
        "name": "train-images-idx3-ubyte.gz", "bytes": 9912422,
        "md5": "f68b3c2dcbeaaa9fbdd348bbdeb94873",
        "sha256": "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609"}


def test_the_command_list_names_every_kind_of_dataset_download_fetches(capsys):
    # `mnistconv --help` is where a newcomer learns what download can fetch: its line
    # once named the MNIST family alone, long after CIFAR, SVHN and MedMNIST joined.
    kinds = ("MNIST", "CIFAR", "SVHN", "MedMNIST")
    for family in dl.FAMILIES.values():  # a new kind of dataset needs its name here
        assert any(kind in family.title for kind in kinds), family.name
    code, out, _ = run_cli(capsys, "--help")
    assert code == 0
    line = " ".join(out.split("\n  download", 1)[1].split("\n  pack", 1)[0].split())
    assert line == "Download the MNIST family, CIFAR, SVHN or MedMNIST, checksums verified."


def cli_process(*args, env=None):
    """The installed-style entry point in a fresh process, real catalogue."""
    full_env = {k: v for k, v in os.environ.items()
                if k.lower() not in ("http_proxy", "https_proxy", "all_proxy",
                                     "mnistconv_base_url")}
    full_env["PYTHONPATH"] = str(REPO)
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "mnistconv", *map(str, args)],
                          capture_output=True, text=True, env=full_env, cwd=REPO, timeout=120)


def test_process_refused_connection_is_one_line(tmp_path, closed_port):
    url = f"http://127.0.0.1:{closed_port}"
    done = cli_process("download", "mnist", tmp_path / "data", "--base-url", url)
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr == (
        f"Error: {url}/train-images-idx3-ubyte.gz: connection refused; nothing was saved; "
        f"check the network connection, or point --base-url (or MNISTCONV_BASE_URL) at "
        f"a reachable mirror\n")
    assert not (tmp_path / "data").exists()


def test_process_terminated_mid_transfer_leaves_nothing(serve, tmp_path):
    name = "train-images-idx3-ubyte.gz"
    # The real catalogue's size, so the transfer starts (the checksum would fail later).
    server = serve({name: bytes(dl.FAMILIES["mnist"].files[0].size)}, {name: "stall"})
    target = tmp_path / "data"
    env = {k: v for k, v in os.environ.items()
           if k.lower() not in ("http_proxy", "https_proxy", "all_proxy")}
    env.update(PYTHONPATH=str(REPO), MNISTCONV_BASE_URL=server.url)
    proc = subprocess.Popen([sys.executable, "-m", "mnistconv", "download", "mnist",
                             str(target)], cwd=REPO, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        # Wait (bounded) until the transfer is under way: a staged file exists.
        for _ in range(600):
            if server.count(name) and target.exists() and staging_leftovers(target):
                break
            threading.Event().wait(0.05)
        assert staging_leftovers(target), "the download never started"
        proc.terminate()
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143
    assert "Traceback" not in err
    assert not target.exists()


@pytest.mark.skipif(not SHARED_MNIST.is_dir(), reason="../shared/data/mnist is not present")
def test_process_real_catalogue_accepts_recompressed_copies(serve, tmp_path):
    """The shared copies hold the official IDX bytes in other gzip wrappers: a mirror
    serving them serves MNIST (its content SHA-256 is the published one), as
    --verify-only says; one changed byte is refused with advice."""
    files = {n: (SHARED_MNIST / n).read_bytes() for n in IDX_NAMES}
    server = serve(files)
    done = cli_process("download", "mnist", tmp_path / "data",
                       env={"MNISTCONV_BASE_URL": server.url})
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    for name in IDX_NAMES:
        assert (tmp_path / "data" / name).read_bytes() == files[name]
    name = "t10k-labels-idx1-ubyte.gz"
    content = bytearray(gzip.decompress(files[name]))
    content[100] ^= 1
    damaged = gzip.compress(bytes(content), mtime=0)
    server = serve({**files, name: damaged})
    done = cli_process("download", "mnist", tmp_path / "other", "-q",
                       env={"MNISTCONV_BASE_URL": server.url})
    assert done.returncode == 1
    assert done.stderr == (
        f"Error: {server.url}/{name}: checksum mismatch: expected sha256 "
        f"{REAL_FAMILIES['mnist'].files[3].sha256}, got "
        f"{hashlib.sha256(damaged).hexdigest()} (decompressed content: sha256 "
        f"{hashlib.sha256(content).hexdigest()}, expected "
        f"{OFFICIAL_IDX_SHA256['t10k-labels-idx1-ubyte']}); nothing was saved: the mirror "
        f"serves different bytes from the ones published{ADVICE}\n")
    assert not (tmp_path / "other" / name).exists()


@pytest.mark.skipif(not SHARED_MNIST.is_dir(), reason="../shared/data/mnist is not present")
def test_real_mnist_files_through_the_library(serve, tmp_path):
    files = {n: (SHARED_MNIST / n).read_bytes() for n in IDX_NAMES}
    server = serve(files)
    progress = Recorder()
    results = dl.download(family_for(files, server.url), tmp_path, progress=progress,
                          retry_delay=0)
    assert [r.action for r in results] == ["downloaded"] * 4
    for name in IDX_NAMES:
        content = gzip.decompress((tmp_path / name).read_bytes())
        assert hashlib.sha256(content).hexdigest() == OFFICIAL_IDX_SHA256[name[:-3]]
    assert sum(e[3] for e in progress.events if e[0] == "start") == sum(
        map(len, files.values()))


# --- the download is directly usable ---------------------------------------------------------

def idx_arrays(files, name):
    """An IDX .gz's array, decoded with numpy at the fixed offsets users rely on."""
    raw = gzip.decompress(files[name])
    return np.frombuffer(raw, np.uint8, offset=16 if "images" in name else 8)


def test_cli_download_then_idx_to_npz(serve, tmp_path, capsys, test_mnist):
    server = serve(test_mnist)
    data = tmp_path / "data"
    code, _, _ = run_cli(capsys, "download", "mnist", data, "--base-url", server.url, "-q")
    assert code == 0
    code, _, err = run_cli(capsys, "idx-to-npz", data, tmp_path / "x.npz", "-q")
    assert (code, err) == (0, "")
    with np.load(tmp_path / "x.npz", allow_pickle=False) as npz:
        assert npz["x_train"].shape == (30, 28, 28)
        assert np.array_equal(npz["x_train"].ravel(),
                              idx_arrays(test_mnist, "train-images-idx3-ubyte.gz"))
        assert np.array_equal(npz["y_test"], idx_arrays(test_mnist, "t10k-labels-idx1-ubyte.gz"))


def test_emnist_split_directory_converts(serve, tmp_path, capsys):
    archive, members = emnist_zip()
    server = serve({"gzip.zip": archive})
    fam = dataclasses.replace(dl.FAMILIES["emnist"], mirrors=(server.url,),
                              files=(spec_for("gzip.zip", archive, md5_only=True),))
    dl.download(fam, tmp_path / "emnist", retry_delay=0)
    code, _, err = run_cli(capsys, "idx-to-npz", tmp_path / "emnist" / "digits",
                           tmp_path / "digits.npz", "-q")
    assert (code, err) == (0, "")
    with np.load(tmp_path / "digits.npz", allow_pickle=False) as npz:
        assert sorted(npz.files) == ["class_names", "x_test", "x_train", "y_test",
                                     "y_train"]
        assert npz["class_names"].tolist() == [str(i) for i in range(10)]
        assert np.array_equal(npz["y_train"], idx_arrays(
            members, "gzip/emnist-digits-train-labels-idx1-ubyte.gz"))
        # Read upright: the stored images transposed.
        stored = idx_arrays(members, "gzip/emnist-digits-train-images-idx3-ubyte.gz")
        assert np.array_equal(npz["x_train"], stored.reshape(-1, 28, 28).transpose(0, 2, 1))


@pytest.mark.skipif(not SHARED_MNIST.is_dir(), reason="../shared/data/mnist is not present")
def test_real_mnist_download_then_idx_to_npz(serve, tmp_path, capsys, monkeypatch):
    files = {n: (SHARED_MNIST / n).read_bytes() for n in IDX_NAMES}
    server = serve(files)
    monkeypatch.setitem(dl.FAMILIES, "mnist", dataclasses.replace(
        dl.FAMILIES["mnist"], files=tuple(spec_for(n, d) for n, d in files.items())))
    data = tmp_path / "data"
    code, _, _ = run_cli(capsys, "download", "mnist", data, "--base-url", server.url, "-q")
    assert code == 0
    code, _, err = run_cli(capsys, "idx-to-npz", data, tmp_path / "mnist.npz", "-q")
    assert (code, err) == (0, "")
    with np.load(tmp_path / "mnist.npz", allow_pickle=False) as npz:
        assert npz["x_train"].shape == (60000, 28, 28)
        assert npz["x_test"].shape == (10000, 28, 28)
        header = struct.pack(">HBBIII", 0, 8, 3, 60000, 28, 28)
        assert hashlib.sha256(header + npz["x_train"].tobytes()).hexdigest() == \
            OFFICIAL_IDX_SHA256["train-images-idx3-ubyte"]
        assert hashlib.sha256(struct.pack(">HBBI", 0, 8, 1, 10000)
                              + npz["y_test"].tobytes()).hexdigest() == \
            OFFICIAL_IDX_SHA256["t10k-labels-idx1-ubyte"]


def test_cli_download_then_idx_to_tfrecord(serve, tmp_path, capsys, test_mnist):
    server = serve(test_mnist)
    data = tmp_path / "data"
    code, _, _ = run_cli(capsys, "download", "mnist", data, "--base-url", server.url, "-q")
    assert code == 0
    code, _, err = run_cli(capsys, "idx-to-tfrecord", data, tmp_path / "out" / "mnist.tfrecord",
                           "-q")
    assert (code, err) == (0, "")
    assert sorted(os.listdir(tmp_path / "out")) == ["mnist-test.tfrecord",
                                                    "mnist-train.tfrecord"]
    # Read back through mnistconv: labels exact, images within JPEG's error.
    code, _, err = run_cli(capsys, "tfrecord-to-npz", tmp_path / "out", tmp_path / "back.npz",
                           "-q")
    assert (code, err) == (0, "")
    with np.load(tmp_path / "back.npz", allow_pickle=False) as npz:
        assert np.array_equal(npz["y_train"],
                              idx_arrays(test_mnist, "train-labels-idx1-ubyte.gz"))
        assert npz["x_test"].shape == (10, 28, 28)


def test_progress_bar_in_bytes_on_a_terminal(serve, tmp_path):
    """On a terminal, the bar counts bytes (done/total, rate); the zeros served here
    have the published size, so the transfer runs and the checksum then refuses it."""
    import pty
    name = "train-images-idx3-ubyte.gz"
    server = serve({name: bytes(REAL_FAMILIES["mnist"].files[0].size)})
    env = {k: v for k, v in os.environ.items()
           if k.lower() not in ("http_proxy", "https_proxy", "all_proxy")}
    env.update(PYTHONPATH=str(REPO), MNISTCONV_BASE_URL=server.url, COLUMNS="120",
               TERM="xterm")
    master, slave = pty.openpty()
    try:
        done = subprocess.run([sys.executable, "-m", "mnistconv", "download", "mnist",
                               str(tmp_path / "d")], cwd=REPO, env=env, stdout=subprocess.PIPE,
                              stderr=slave, timeout=120)
        os.close(slave)
        chunks = []
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the other side is closed and drained
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(master)
    screen = b"".join(chunks).decode("utf-8", "replace")
    assert done.returncode == 1
    assert name in screen and "9.9/9.9 MB" in screen
    assert "checksum mismatch: expected sha256 440fcabf" in screen
    assert not (tmp_path / "d").exists()


# --- verification by content: recompressed and gunzipped copies (MNIST) -------------------

def content_spec(name, data):
    """A catalogue entry like MNIST's: archive digests plus the decompressed content's."""
    content = gzip.decompress(data)
    return dataclasses.replace(spec_for(name, data),
                               content_sha256=hashlib.sha256(content).hexdigest(),
                               content_size=len(content))


@pytest.fixture
def content_mnist(monkeypatch):
    """The generated files in MNIST's catalogue place, with content hashes as MNIST's."""
    files = generated_files()
    monkeypatch.setitem(dl.FAMILIES, "mnist", dataclasses.replace(
        dl.FAMILIES["mnist"], files=tuple(content_spec(n, d) for n, d in files.items())))
    return files


def recompressed(data, level=1):
    """The same content in another gzip wrapper: other level, a name and an mtime."""
    out = io.BytesIO()
    with gzip.GzipFile("renamed", "wb", level, out, mtime=1234567890) as f:
        f.write(gzip.decompress(data))
    assert out.getvalue() != data
    return out.getvalue()


def test_catalogue_content_hashes_are_the_official_ones():
    try:  # the browser pack's module, wherever the package layout keeps it
        from mnistconv.packs.browser import OFFICIAL_MNIST
    except ImportError:
        from mnistconv.packs.browser import OFFICIAL_MNIST
    mnist = REAL_FAMILIES["mnist"]
    assert {s.name[:-3]: s.content_sha256 for s in mnist.files} == OFFICIAL_MNIST \
        == OFFICIAL_IDX_SHA256
    assert [s.content_size for s in mnist.files] == [47040016, 60008, 7840016, 10008]
    # Families whose content hashes are not known keep the archive check only.
    for name in ("fashion-mnist", "kmnist", "emnist"):
        assert all(s.content_sha256 is None for s in REAL_FAMILIES[name].files)


def test_verify_by_archive_or_content(tmp_path):
    files = generated_files()
    fam = family_for(files, "http://127.0.0.1:9",
                     files=tuple(content_spec(n, d) for n, d in files.items()))
    names = list(files)
    (tmp_path / names[0]).write_bytes(files[names[0]])
    (tmp_path / names[1]).write_bytes(recompressed(files[names[1]]))
    (tmp_path / names[2][:-3]).write_bytes(gzip.decompress(files[names[2]]))
    # Gunzipped, but still named .gz.
    (tmp_path / names[3]).write_bytes(gzip.decompress(files[names[3]]))
    results = dl.verify(fam, tmp_path)
    assert [(Path(r.path).name, r.action, r.check, r.problem) for r in results] == [
        (names[0], "verified", "archive sha256 matches", ""),
        (names[1], "verified", "content sha256 matches (recompressed)", ""),
        (names[2][:-3], "verified", "uncompressed file, content sha256 matches", ""),
        (names[3], "verified", "uncompressed file, content sha256 matches", "")]
    assert results[1].sha256 == hashlib.sha256(recompressed(files[names[1]])).hexdigest()
    # Without a content hash (Fashion-MNIST, KMNIST) only the archive's bytes count.
    plain = family_for(files, "http://127.0.0.1:9")
    assert [(r.action, r.check or r.problem[:17]) for r in dl.verify(plain, tmp_path)] == [
        ("verified", "archive sha256 matches"), ("invalid", "checksum mismatch"),
        ("missing", "missing"), ("invalid", "checksum mismatch")]
    md5_only = family_for(files, "http://127.0.0.1:9", files=(
        spec_for(names[0], files[names[0]], md5_only=True),))
    assert dl.verify(md5_only, tmp_path)[0].check == "archive md5 matches"


def test_verify_by_content_names_what_is_wrong(tmp_path):
    files = generated_files()
    specs = {n: content_spec(n, d) for n, d in files.items()}
    fam = family_for(files, "http://127.0.0.1:9", files=tuple(specs.values()))
    names = list(files)
    other = gzip.compress(gzip.decompress(files[names[0]])[:-1] + b"\xff", 9, mtime=0)
    (tmp_path / names[0]).write_bytes(other)  # recompressed, one pixel changed
    cut = recompressed(files[names[1]])[:-20]
    (tmp_path / names[1]).write_bytes(cut)  # recompressed, then cut short
    (tmp_path / names[2][:-3]).write_bytes(b"not MNIST")  # uncompressed, wrong
    # A bomb: far more than the content's known size once decompressed; reading stops
    # one byte past it.
    bomb = gzip.compress(bytes(50 << 20), 9, mtime=0)
    (tmp_path / names[3]).write_bytes(bomb)
    progress = Recorder()
    results = dl.verify(fam, tmp_path, progress)

    def mismatch(name, data):
        return (f"checksum mismatch: expected sha256 {specs[name].sha256}, got "
                f"{hashlib.sha256(data).hexdigest()}")
    assert [(Path(r.path).name, r.action, r.problem) for r in results] == [
        (names[0], "invalid", mismatch(names[0], other) + " (decompressed content: sha256 "
         f"{hashlib.sha256(gzip.decompress(other)).hexdigest()}, expected "
         f"{specs[names[0]].content_sha256})"),
        (names[1], "invalid", mismatch(names[1], cut) + " (and it does not decompress: "
         "Compressed file ended before the end-of-stream marker was reached)"),
        (names[2][:-3], "invalid", "checksum mismatch: expected content sha256 "
         f"{specs[names[2]].content_sha256}, got {hashlib.sha256(b'not MNIST').hexdigest()}"),
        (names[3], "invalid", mismatch(names[3], bomb) + " (its decompressed content is "
         f"longer than the official {specs[names[3]].content_size} bytes)")]
    bomb_check = [e for e in progress.events if e[0] == "start"][-1]
    assert bomb_check[1] == f"check {names[3]} content"
    assert bomb_check[3] <= specs[names[3]].content_size + 1
    # A junk file under the .gz name is neither the archive nor the content.
    (tmp_path / names[3]).write_bytes(b"junk")
    assert dl.verify(fam, tmp_path)[3].problem == mismatch(names[3], b"junk") + (
        f" (nor is it the uncompressed file: expected content sha256 "
        f"{specs[names[3]].content_sha256})")


def test_cli_verify_only_says_which_digest_matched(tmp_path, capsys, content_mnist):
    names = list(content_mnist)
    (tmp_path / names[0]).write_bytes(content_mnist[names[0]])
    (tmp_path / names[1]).write_bytes(recompressed(content_mnist[names[1]], 9))
    (tmp_path / names[2][:-3]).write_bytes(gzip.decompress(content_mnist[names[2]]))
    (tmp_path / names[3][:-3]).write_bytes(gzip.decompress(content_mnist[names[3]]))
    code, out, err = run_cli(capsys, "download", "mnist", tmp_path, "--verify-only")
    assert (code, out) == (0, "")
    assert err == (
        "ok       train-images-idx3-ubyte.gz: archive sha256 matches\n"
        "ok       train-labels-idx1-ubyte.gz: content sha256 matches (recompressed)\n"
        "ok       t10k-images-idx3-ubyte: uncompressed file, content sha256 matches\n"
        "ok       t10k-labels-idx1-ubyte: uncompressed file, content sha256 matches\n"
        f"All 4 files of mnist in {tmp_path} are valid.\n")
    code, out, err = run_cli(capsys, "download", "mnist", tmp_path, "--verify-only", "--json")
    import json
    report = json.loads(out)
    assert (code, report["ok"]) == (0, True)
    assert [(f["path"], f["check"]) for f in report["files"]] == [
        ("train-images-idx3-ubyte.gz", "archive sha256 matches"),
        ("train-labels-idx1-ubyte.gz", "content sha256 matches (recompressed)"),
        ("t10k-images-idx3-ubyte", "uncompressed file, content sha256 matches"),
        ("t10k-labels-idx1-ubyte", "uncompressed file, content sha256 matches")]

    # One wrong uncompressed file: exit 1, its line and the one-line error name it.
    (tmp_path / "t10k-labels-idx1-ubyte").write_bytes(b"\0\0\x08\x01\0\0\0\0")
    got = hashlib.sha256(b"\0\0\x08\x01\0\0\0\0").hexdigest()
    expected = hashlib.sha256(gzip.decompress(content_mnist[names[3]])).hexdigest()
    code, out, err = run_cli(capsys, "download", "mnist", tmp_path, "--verify-only")
    assert (code, out) == (1, "")
    assert err.splitlines()[3:] == [
        f"invalid  t10k-labels-idx1-ubyte: checksum mismatch: expected content sha256 "
        f"{expected}, got {got}",
        f"Error: {tmp_path / 't10k-labels-idx1-ubyte'}: checksum mismatch: expected content "
        f"sha256 {expected}, got {got}; run: mnistconv download mnist {tmp_path} --force"]
    # Neither name present: missing, as before.
    os.unlink(tmp_path / "t10k-labels-idx1-ubyte")
    code, _, err = run_cli(capsys, "download", "mnist", tmp_path, "--verify-only")
    assert code == 1
    assert err.splitlines()[3] == "missing  t10k-labels-idx1-ubyte.gz"
    assert err.splitlines()[4] == (f"Error: {tmp_path / 't10k-labels-idx1-ubyte.gz'}: "
                                   f"missing; run: mnistconv download mnist {tmp_path}")


def test_cli_download_keeps_valid_copies_by_content(serve, tmp_path, capsys, content_mnist):
    """Copies that verify by content are present: not fetched, not refused; a wrong
    uncompressed copy is left alone and the .gz is fetched beside it."""
    server = serve(content_mnist)
    names = list(content_mnist)
    (tmp_path / names[0]).write_bytes(recompressed(content_mnist[names[0]]))
    (tmp_path / names[1][:-3]).write_bytes(gzip.decompress(content_mnist[names[1]]))
    (tmp_path / names[2][:-3]).write_bytes(b"stale")
    code, out, err = run_cli(capsys, "download", "mnist", tmp_path, "--base-url", server.url)
    assert (code, out) == (0, "")
    lines = err.splitlines()
    assert lines[0].startswith("present    train-images-idx3-ubyte.gz (")
    assert lines[1].startswith("present    train-labels-idx1-ubyte (")
    assert lines[2].startswith("downloaded t10k-images-idx3-ubyte.gz (")
    assert lines[3].startswith("downloaded t10k-labels-idx1-ubyte.gz (")
    assert [server.count(n) for n in names] == [0, 0, 1, 1]
    assert (tmp_path / names[2][:-3]).read_bytes() == b"stale"
    assert (tmp_path / names[2]).read_bytes() == content_mnist[names[2]]
    assert staging_leftovers(tmp_path) == []


@pytest.mark.skipif(not SHARED_MNIST.is_dir(), reason="../shared/data/mnist is not present")
def test_official_files_recompressed_or_uncompressed_verify(tmp_path, capsys):
    """The real catalogue: the shared copies (gzip -9n, not the published archives),
    one of them recompressed again at level 1, and two gunzipped, all verify OK."""
    folder = tmp_path / "mnist"
    folder.mkdir()
    shared_copy = (SHARED_MNIST / "train-images-idx3-ubyte.gz").read_bytes()
    (folder / "train-images-idx3-ubyte.gz").write_bytes(shared_copy)
    (folder / "train-labels-idx1-ubyte.gz").write_bytes(
        recompressed((SHARED_MNIST / "train-labels-idx1-ubyte.gz").read_bytes()))
    for name in ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"):
        (folder / name).write_bytes(gzip.decompress((SHARED_MNIST / f"{name}.gz").read_bytes()))
    code, out, err = run_cli(capsys, "download", "mnist", folder, "--verify-only")
    assert (code, out) == (0, "")
    assert err == (
        "ok       train-images-idx3-ubyte.gz: content sha256 matches (recompressed)\n"
        "ok       train-labels-idx1-ubyte.gz: content sha256 matches (recompressed)\n"
        "ok       t10k-images-idx3-ubyte: uncompressed file, content sha256 matches\n"
        "ok       t10k-labels-idx1-ubyte: uncompressed file, content sha256 matches\n"
        f"All 4 files of mnist in {folder} are valid.\n")
    # One changed byte of the uncompressed images: its content hash no longer matches.
    images = bytearray((folder / "t10k-images-idx3-ubyte").read_bytes())
    images[1000] ^= 1
    (folder / "t10k-images-idx3-ubyte").write_bytes(bytes(images))
    code, _, err = run_cli(capsys, "download", "mnist", folder, "--verify-only", "-q")
    assert code == 1
    assert err == (
        f"Error: {folder / 't10k-images-idx3-ubyte'}: checksum mismatch: expected content "
        f"sha256 {OFFICIAL_IDX_SHA256['t10k-images-idx3-ubyte']}, got "
        f"{hashlib.sha256(images).hexdigest()}; run: mnistconv download mnist {folder} "
        f"--force\n")
    assert sorted(os.listdir(folder)) == ["t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte",
                                          "train-images-idx3-ubyte.gz",
                                          "train-labels-idx1-ubyte.gz"]


# --- other sources: the Hub's Parquet, Keras' mirror --------------------------------------

def family_arrays(n_train=30, n_test=10, seed=21):
    rng = np.random.default_rng(seed)
    return {split: (rng.integers(0, 256, (n, 28, 28), dtype=np.uint8),
                    (np.arange(n) % 10).astype(np.uint8))
            for split, n in (("train", n_train), ("test", n_test))}


def hub_parquet(images, labels, names):
    """A Parquet file as the Hub's conversion holds it: image {bytes: PNG, path},
    label int64, the features (Image, ClassLabel) in the huggingface metadata."""
    import json
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq
    from PIL import Image
    pngs = []
    for image in images:
        buffer = io.BytesIO()
        Image.fromarray(image).save(buffer, format="PNG")
        pngs.append({"bytes": buffer.getvalue(), "path": None})
    table = pa.table({"image": pa.array(pngs, pa.struct([("bytes", pa.binary()),
                                                         ("path", pa.string())])),
                      "label": pa.array(labels.astype(np.int64), pa.int64())})
    features = {"info": {"features": {"image": {"_type": "Image"},
                                      "label": {"names": list(names),
                                                "_type": "ClassLabel"}}}}
    table = table.replace_schema_metadata({"huggingface": json.dumps(features)})
    out = io.BytesIO()
    pq.write_table(table, out)
    return out.getvalue()


FASHION = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt",
           "Sneaker", "Bag", "Ankle boot")


@pytest.fixture
def test_fashion(monkeypatch):
    """Fashion-MNIST's catalogue entry for generated data: the original layout's .gz
    files and the Hub's Parquet of the same data, the official content hashes computed
    here from the IDX files the data makes."""
    pytest.importorskip("pyarrow")
    if "parquet" not in __import__("mnistconv").formats():
        pytest.skip("the Parquet format is not registered yet")
    arrays = family_arrays()
    served, contents = {}, {}
    for split, stem in (("train", "train"), ("test", "t10k")):
        images, labels = arrays[split]
        for kind, array in (("images-idx3", images), ("labels-idx1", labels)):
            raw = idx_bytes(array)
            name = f"{stem}-{kind}-ubyte.gz"
            served[name] = gzip.compress(raw, 9, mtime=0)
            contents[name] = (hashlib.sha256(raw).hexdigest(), len(raw))
        served[f"hub/fashion_mnist/{split}-00000-of-00001.parquet"] = \
            hub_parquet(images, labels, FASHION)
    specs = tuple(dataclasses.replace(spec_for(n, d), content_sha256=contents[n][0],
                                      content_size=contents[n][1])
                  for n, d in served.items() if n in contents)
    real = REAL_FAMILIES["fashion-mnist"]
    hub = dataclasses.replace(real.source("hf"), mirrors=("http://127.0.0.1:1/hub",))
    fam = dataclasses.replace(real, files=specs, sources=(hub,))
    monkeypatch.setitem(dl.FAMILIES, "fashion-mnist", fam)
    return served, contents, arrays


def content_hashes(folder):
    out = {}
    for name in os.listdir(folder):
        data = (folder / name).read_bytes()
        if name.endswith(".gz"):
            data, name = gzip.decompress(data), name[:-3]
        out[name] = hashlib.sha256(data).hexdigest()
    return out


def test_cli_fashion_from_the_hub_gives_the_official_content(serve, tmp_path, capsys,
                                                              test_fashion):
    served, contents, arrays = test_fashion
    server = serve(served)
    official = {n[:-3]: h for n, (h, _) in contents.items()}
    code, out, err = run_cli(capsys, "download", "fashion-mnist", tmp_path / "hf",
                             "--source", "hf", "--base-url", server.url + "/hub")
    assert (code, out) == (0, "")
    assert f"converted  train-images-idx3-ubyte (23.5 kB) from {server.url}/hub/" \
           "fashion_mnist/train-00000-of-00001.parquet" in err
    hashes = content_hashes(tmp_path / "hf")
    assert {n: hashes[n] for n in official} == official
    # The Hub's ClassLabel names come along beside the IDX files.
    assert (tmp_path / "hf" / "classes.txt").read_text().splitlines() == list(FASHION)
    assert not staging_leftovers(tmp_path)
    assert sorted(p for p, _ in server.requests) == [
        "hub/fashion_mnist/test-00000-of-00001.parquet",
        "hub/fashion_mnist/train-00000-of-00001.parquet"]
    # The original layout from its mirror: the same content.
    code, out, err = run_cli(capsys, "download", "fashion-mnist", tmp_path / "orig",
                             "--base-url", server.url)
    assert code == 0
    assert content_hashes(tmp_path / "orig") == official
    # What the Hub gave verifies by content, and a second run fetches nothing.
    code, out, err = run_cli(capsys, "download", "fashion-mnist", tmp_path / "hf",
                             "--verify-only", "-q")
    assert (code, out, err) == (0, "", "")
    before = len(server.requests)
    code, out, err = run_cli(capsys, "download", "fashion-mnist", tmp_path / "hf",
                             "--source", "hf", "--base-url", server.url + "/hub", "--json")
    assert code == 0 and len(server.requests) == before
    import json
    assert [f["action"] for f in json.loads(out)["files"]] == ["present"] * 4


def test_cli_a_source_serving_other_data_is_refused(serve, tmp_path, capsys, test_fashion):
    served, contents, arrays = test_fashion
    images, labels = arrays["train"]
    other = dict(served)
    other["hub/fashion_mnist/train-00000-of-00001.parquet"] = hub_parquet(
        255 - images, labels, FASHION)
    server = serve(other)
    target = tmp_path / "hf"
    code, out, err = run_cli(capsys, "download", "fashion-mnist", target, "--source", "hf",
                             "--base-url", server.url + "/hub")
    assert (code, out) == (1, "")
    changed = idx_bytes(255 - images)
    urls = ", ".join(f"{server.url}/hub/fashion_mnist/{s}-00000-of-00001.parquet"
                     for s in ("train", "test"))
    assert err == (f"Error: {urls}: converted to IDX, its train-images-idx3-ubyte has sha256 "
                   f"{hashlib.sha256(changed).hexdigest()}, not the official "
                   f"{contents['train-images-idx3-ubyte.gz'][0]}; nothing was saved: the "
                   "source holds other data than the published files\n")
    assert not target.exists()


def test_keras_mnist_npz_converted_to_the_official_content(serve, tmp_path, monkeypatch):
    arrays = family_arrays(seed=5)
    buffer = io.BytesIO()
    np.savez(buffer, x_train=arrays["train"][0], y_train=arrays["train"][1],
             x_test=arrays["test"][0], y_test=arrays["test"][1])
    npz = buffer.getvalue()
    contents = {}
    for split, stem in (("train", "train"), ("test", "t10k")):
        for kind, array in zip(("images-idx3", "labels-idx1"), arrays[split]):
            raw = idx_bytes(array)
            contents[f"{stem}-{kind}-ubyte.gz"] = (hashlib.sha256(raw).hexdigest(), len(raw))
    real = REAL_FAMILIES["mnist"]
    keras = real.source("keras")
    assert keras.files[0].sha256 == \
        "731c5ac602752760c8e48fbffcf8c3b850d9dc2a2aedcf2cc48468fc17b673d1"
    keras = dataclasses.replace(keras, files=(spec_for("mnist.npz", npz),))
    fam = dataclasses.replace(real, sources=(keras,), files=tuple(
        dl.RemoteFile(n, content_sha256=h, content_size=s) for n, (h, s) in contents.items()))
    server = serve({"mnist.npz": npz})
    results = dl.download(fam, tmp_path / "k", base_urls=[server.url], source="keras",
                          retry_delay=0)
    assert [r.action for r in results] == ["converted"] * 4
    assert {r.check for r in results} == {"content sha256 matches the official file"}
    assert content_hashes(tmp_path / "k") == {n[:-3]: h for n, (h, _) in contents.items()}
    # The real catalogue's SHA-256 of Keras' mnist.npz refuses these bytes.
    assert "checksum mismatch: expected sha256 731c5ac6" in download_error(
        REAL_FAMILIES["mnist"], tmp_path / "real", base_urls=[server.url], source="keras",
        retries=0, retry_delay=0)
    assert not (tmp_path / "real").exists()


def test_cli_unknown_source_is_a_usage_error(tmp_path, capsys):
    code, out, err = run_cli(capsys, "download", "kmnist", tmp_path / "k", "--source", "hf")
    assert (code, out) == (2, "")
    assert err == "Error: kmnist has no source 'hf'; its sources: original\n"
    assert not (tmp_path / "k").exists()


def test_catalogue_sources_and_their_checksums():
    mnist, fashion = REAL_FAMILIES["mnist"], REAL_FAMILIES["fashion-mnist"]
    assert [s.name for s in mnist.sources] == ["keras", "hf"]
    assert mnist.source("hf").mirrors == ("https://huggingface.co/datasets/ylecun/mnist/"
                                          "resolve/main",)
    assert [f.name for f in mnist.source("hf").files] == [
        "mnist/train-00000-of-00001.parquet", "mnist/test-00000-of-00001.parquet"]
    # Keras' Fashion-MNIST mirror serves the publishers' files, checked by their digests.
    assert fashion.source("keras").files == fashion.files
    assert fashion.source("keras").mirrors == (
        "https://storage.googleapis.com/tensorflow/tf-keras-datasets",)
    assert [f.sha256[:8] for f in fashion.files] == ["3aede38d", "a04f1713", "346e55b9",
                                                     "67da17c7"]


# --- colour datasets (issue 37): CIFAR's tar.gz, MedMNIST's sizes, SVHN ----------------------

def test_colour_catalogue_holds_the_published_md5s():
    fams = REAL_FAMILIES
    assert [(f.name, f.md5) for f in fams["cifar10"].files] == [
        ("cifar-10-binary.tar.gz", "c32a1d4ab5d03f1284b67883e8d87530")]
    assert fams["cifar10"].source("python").files[0].md5 == "c58f30108f718f92721af3b95e74349a"
    assert fams["cifar100"].files[0].md5 == "03b5dce01913d631647c71ecec9e9cb8"
    assert fams["cifar100"].source("python").files[0].md5 == "eb9058c3a382ffc7106e4002c42a8d85"
    assert [(f.name, f.md5) for f in fams["svhn"].source("extra").files] == [
        ("train_32x32.mat", "e26dedcc434d2e4c54c9b2d4a06d8373"),
        ("test_32x32.mat", "eb5a983be6a315427106f1b164d9cef3"),
        ("extra_32x32.mat", "a93ce644f1a588dc4d68dda5feec44a7")]
    chest = fams["chestmnist"]
    assert chest.files[0].name == "chestmnist.npz"
    assert [(s.name, s.files[0].name, s.files[0].md5) for s in chest.sources] == [
        ("64", "chestmnist_64.npz", "9de6cd0b934ebb5b7426cfba5efbae16"),
        ("128", "chestmnist_128.npz", "db107e5590b27930b62dbaf558aebee3"),
        ("224", "chestmnist_224.npz", "45bd33e6f06c3e8cdb481c74a89152aa")]
    assert len(chest.class_names) == 14 and chest.class_names[13] == "hernia"
    assert sum(1 for f in fams.values() if "MedMNIST" in f.title) == 12


def _tar_gz(members):
    import tarfile
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo("cifar-10-batches-bin/evil")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(link)
    return buffer.getvalue()


def test_cifar_archive_is_verified_extracted_and_reads_as_cifar(serve, tmp_path):
    rng = np.random.default_rng(0)
    members = {f"cifar-10-batches-bin/{n}": bytes([3]) + rng.bytes(3072)
               for n in ("data_batch_1.bin", "test_batch.bin")}
    members["cifar-10-batches-bin/batches.meta.txt"] = b"".join(
        n.encode() + b"\n" for n in dl.FAMILIES["cifar10"].class_names) + b"\n"
    members["cifar-10-batches-bin/readme.html"] = b"<html>"
    archive = _tar_gz(members)
    server = serve({"cifar-10-binary.tar.gz": archive})
    fam = dataclasses.replace(REAL_FAMILIES["cifar10"], mirrors=(server.url,),
                              files=(spec_for("cifar-10-binary.tar.gz", archive, True),))
    results = dl.download(fam, tmp_path, retry_delay=0)
    assert [r.action for r in results] == ["downloaded"] + ["extracted"] * 4
    folder = tmp_path / "cifar-10-batches-bin"
    assert sorted(os.listdir(folder)) == ["batches.meta.txt", "data_batch_1.bin",
                                          "readme.html", "test_batch.bin"]  # no link
    for name, data in members.items():
        assert (tmp_path / name).read_bytes() == data
    import mnistconv
    ds = mnistconv.read(folder)
    assert ds.format == "cifar" and ds.splits["test"].labels().tolist() == [3]
    # Again: everything present and checked against the archive's CRC-32s.
    again = dl.download(fam, tmp_path, retry_delay=0)
    assert [r.action for r in again] == ["present"] * 5
    (folder / "test_batch.bin").write_bytes(b"x" * 3073)
    with pytest.raises(UsageError, match="exists and does not match the archive"):
        dl.download(fam, tmp_path, retry_delay=0)


def test_medmnist_size_is_a_source_with_its_own_file(serve, tmp_path):
    buffer = io.BytesIO()
    np.savez_compressed(buffer, train_images=np.zeros((2, 64, 64, 3), np.uint8),
                        train_labels=np.zeros((2, 1), np.uint8))
    data = buffer.getvalue()
    server = serve({"pathmnist_64.npz": data})
    real = REAL_FAMILIES["pathmnist"]
    sources = tuple(dataclasses.replace(s, files=(spec_for(s.files[0].name, data, True),))
                    if s.name == "64" else s for s in real.sources)
    fam = dataclasses.replace(real, sources=sources)
    results = dl.download(fam, tmp_path, source="64", base_urls=[server.url], retry_delay=0)
    assert [(os.path.basename(r.path), r.action) for r in results] == [
        ("pathmnist_64.npz", "downloaded")]
    assert (tmp_path / "pathmnist_64.npz").read_bytes() == data
    assert server.requests[0][0] == "pathmnist_64.npz"


# --- local copies: a folder or file:// mirror (issue 38) ------------------------------------

@pytest.fixture(scope="module")
def recompressed_copy(tmp_path_factory):
    """A folder of the official files' data recompressed (gzip level 1, a name, an
    mtime): other bytes than the published archives, the same content."""
    if not SHARED_MNIST.is_dir():
        pytest.skip("../shared/data/mnist is not present")
    folder = tmp_path_factory.mktemp("copy") / "mnist copy"
    folder.mkdir()
    for name in IDX_NAMES:
        (folder / name).write_bytes(recompressed((SHARED_MNIST / name).read_bytes()))
    return folder


@pytest.mark.parametrize("how", ["folder", "file-url"])
def test_download_from_a_folder_of_the_official_files_recompressed(
        tmp_path, capsys, recompressed_copy, how):
    base = recompressed_copy.as_uri() if how == "file-url" else str(recompressed_copy)
    code, out, err = run_cli(capsys, "download", "mnist", tmp_path / "data", "--base-url",
                             base)
    assert (code, out) == (0, ""), err
    lines = err.splitlines()
    for line, name in zip(lines, IDX_NAMES):
        assert line.startswith(f"copied     {name} (")
        assert line.endswith(f" from {recompressed_copy / name}: content sha256 matches "
                             "(recompressed)")
    assert lines[4] == f"Next: mnistconv idx-to-npz {tmp_path / 'data'} mnist.npz"
    for name in IDX_NAMES:
        assert (tmp_path / "data" / name).read_bytes() == (recompressed_copy / name).read_bytes()
    code, _, err = run_cli(capsys, "download", "mnist", tmp_path / "data", "--verify-only")
    assert code == 0 and err.endswith("are valid.\n")


def test_a_damaged_local_copy_is_refused_with_advice(tmp_path, capsys, recompressed_copy):
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    for name in IDX_NAMES:
        os.symlink(recompressed_copy / name, mirror / name)
    name = "t10k-labels-idx1-ubyte.gz"
    content = bytearray(gzip.decompress((SHARED_MNIST / name).read_bytes()))
    content[500] ^= 1
    damaged = gzip.compress(bytes(content), mtime=0)
    (mirror / name).unlink()
    (mirror / name).write_bytes(damaged)
    code, out, err = run_cli(capsys, "download", "mnist", tmp_path / "data", "--base-url",
                             mirror, "-q")
    assert (code, out) == (1, "")
    assert err == (
        f"Error: {mirror / name}: checksum mismatch: expected sha256 "
        f"{REAL_FAMILIES['mnist'].files[3].sha256}, got "
        f"{hashlib.sha256(damaged).hexdigest()} (decompressed content: sha256 "
        f"{hashlib.sha256(content).hexdigest()}, expected "
        f"{OFFICIAL_IDX_SHA256['t10k-labels-idx1-ubyte']}); nothing was saved: the mirror "
        f"serves different bytes from the ones published{ADVICE}\n")
    assert not (tmp_path / "data" / name).exists()
    # A file missing from the folder: where to look, said.
    (mirror / name).unlink()
    code, _, err = run_cli(capsys, "download", "mnist", tmp_path / "data", "--base-url",
                           mirror, "-q")
    assert code == 1
    assert err == (f"Error: {mirror / name}: no such file in the folder; nothing was "
                   "saved; check that --base-url names the folder holding the published "
                   "files, under their published names\n")


@pytest.mark.parametrize("base, message", [
    ("ftp://example.org/mnist", "Error: ftp://example.org/mnist: --base-url must be an "
     "http(s) URL, a file:// URL or a folder; give the mirror's http(s) address, or the "
     "folder holding a copy of the files\n"),
    ("no/such/folder", "Error: no/such/folder: --base-url names no folder here; give the "
     "folder holding a copy of the files (or an http(s) URL)\n"),
    ("file://server/share", "Error: file://server/share: a file:// URL of another host "
     "(server); mount it and give the folder, or use file:///path\n"),
])
def test_a_base_url_that_is_no_mirror_is_a_usage_error(tmp_path, capsys, base, message):
    code, out, err = run_cli(capsys, "download", "mnist", tmp_path / "data", "--base-url",
                             base)
    assert (code, out, err) == (2, "", message)
    assert not (tmp_path / "data").exists()
