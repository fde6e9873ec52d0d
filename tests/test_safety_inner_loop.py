"""In-process counterparts of safety rules that were pinned only by tests starting a
process, so `make check` catches a slip in them within a minute. Every oracle is written
from the rule as the docs state it (1032:1 and 32 MiB of slack as numbers, the JPEG
error from another decoder's pixels, the Host names `serve` admits), never computed with
the function under test.

- the FIFO flag: a FIFO named as an input is refused at once, never waited on;
- the budget's ratio: a claim of more than 1032 x the stored bytes + 32 MiB is refused,
  one byte less is read;
- compare's JPEG hint names the tolerance that passes;
- serve's Host check: only localhost, 127.0.0.1 and [::1] with the port;
- the JPEG error of a sharded TFRecord set merged over its shards (sum and max).
"""

import os
import threading

import numpy as np
import pytest

import mnistconv
from helpers import http_get, make_idx_dir, run_main, small_digits
from mnistconv import ArraySplit, Dataset
from mnistconv.errors import FormatError, MnistconvError

RATIO = 1032  # deflate's most: the rule in docs/safety.md
SLACK = 32 * 2 ** 20  # what any input may hold whatever its size


# --- a FIFO is never waited on --------------------------------------------------------

def test_a_fifo_as_input_is_refused_without_waiting(tmp_path):
    from mnistconv.io.fileio import open_input
    fifo = tmp_path / "train-images-idx3-ubyte"
    os.mkfifo(fifo)
    outcome = []

    def attempt():
        try:
            open_input(str(fifo), str(tmp_path)).close()
            outcome.append("opened")
        except MnistconvError as e:
            outcome.append(str(e))
    t = threading.Thread(target=attempt, daemon=True)
    t.start()
    t.join(5)
    if t.is_alive():
        # Blocked in open(): a writer end releases it so the test ends either way.
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)
        t.join(5)
        pytest.fail("open_input waited for a writer on a FIFO")
    assert len(outcome) == 1 and "FIFO" in outcome[0] and str(fifo) in outcome[0]


def test_a_fifo_inside_an_input_folder_ends_the_read_in_one_line(tmp_path, capsys):
    images, labels = small_digits(10)
    make_idx_dir(tmp_path / "d", images, labels, "train")
    os.remove(tmp_path / "d" / "train-images-idx3-ubyte")
    os.mkfifo(tmp_path / "d" / "train-images-idx3-ubyte")
    code, _, err = run_main(capsys, "info", tmp_path / "d")
    assert code == 2  # a FIFO where a file belongs: a usage error, as test_confinement
    assert err.count("\n") == 1 and "FIFO" in err and "train-images-idx3-ubyte" in err


# --- the budget's ratio, as numbers ---------------------------------------------------

def test_the_expansion_rule_is_1032_to_1_plus_32_mib():
    from mnistconv.io.budget import check_expansion
    stored = 1000
    most = stored * RATIO + SLACK  # 34,586,432 bytes
    check_expansion("f", most, 1, stored)  # exactly at the rule: read
    check_expansion("f", most // 784, 784, stored)
    with pytest.raises(FormatError, match="more than 1032:1 expansion"):
        check_expansion("f", most + 1, 1, stored)
    with pytest.raises(FormatError, match=r"34,586,433 bytes\) in 1,000 bytes"):
        check_expansion("f", 1, most + 1, stored)


# --- compare's JPEG hint ---------------------------------------------------------------

def test_compare_names_the_jpeg_tolerance_that_passes(tmp_path, capsys):
    images, labels = small_digits(40, seed=5)
    make_idx_dir(tmp_path / "a", images, labels, "train")
    out = tmp_path / "b.tfrecord"
    mnistconv.write(mnistconv.read(str(tmp_path / "a")), str(out), "tfrecord",
                    image_format="jpeg")
    # The worst pixel error from PIL's decode of the records, not from mnistconv.
    decoded = [_as_tensorflow_decodes(im) for im in _jpeg_payloads(out)]
    worst = int(np.abs(np.stack(decoded).astype(int) - images).max())
    assert worst > 0
    code, out_text, _ = run_main(capsys, "compare", tmp_path / "a", out)
    assert code == 1
    advice = f"B is JPEG (lossy): pass --tolerance {worst}, or convert with " \
        "--image-format png"
    assert f"hint: {advice}" in out_text.splitlines()
    code, _, err = run_main(capsys, "compare", tmp_path / "a", out, "--tolerance",
                            str(worst), "-q")
    assert code == 0, err


def _as_tensorflow_decodes(data):
    """tf.io.decode_jpeg's pixels (its default is libjpeg-turbo's fast integer IDCT),
    from libjpeg-turbo directly: the figures mnistconv reports are those TensorFlow sees."""
    simplejpeg = pytest.importorskip("simplejpeg")
    return simplejpeg.decode_jpeg(data, colorspace="GRAY", fastdct=True)[..., 0]


def _jpeg_payloads(path):
    """The encoded image of every record of a TFRecord file (protobuf's own parser)."""
    from mnistconv.codecs.example import example_class
    Example = example_class()
    blob = open(path, "rb").read()
    out, pos = [], 0
    while pos < len(blob):
        length = int.from_bytes(blob[pos:pos + 8], "little")
        ex = Example()
        ex.ParseFromString(blob[pos + 12:pos + 12 + length])
        out.append(ex.features.feature["image"].bytes_list.value[0])
        pos += 16 + length
    return out


# --- the JPEG error merged over shards ----------------------------------------------

def test_jpeg_error_of_a_sharded_set_is_every_shards_sum_and_max(tmp_path):
    images, labels = small_digits(90, seed=8)
    ds = Dataset("t", {"train": ArraySplit("train", images, labels)})
    result = mnistconv.write(ds, str(tmp_path / "m.tfrecord"), "tfrecord",
                             image_format="jpeg", shards=3, exact_jpeg_error=True)
    decoded = [_as_tensorflow_decodes(im) for f in result for im in _jpeg_payloads(f.path)]
    diff = np.abs(np.stack(decoded).astype(int) - images)
    # The shards' errors differ, so a merge that kept one shard's max or sum shows.
    per_shard = [diff[i * 30:(i + 1) * 30] for i in range(3)]
    assert len({int(d.max()) for d in per_shard}) > 1 or \
        len({round(float(d.mean()), 4) for d in per_shard}) > 1
    assert result.stats["jpeg_max_abs_error"] == int(diff.max())
    assert result.stats["jpeg_mean_abs_error"] == pytest.approx(diff.mean(), abs=5e-5)
    assert result.stats["jpeg_error_records"] == 90


# --- serve's Host check ----------------------------------------------------------------

@pytest.fixture
def served(tmp_path):
    from mnistconv.views.serve import make_server
    (tmp_path / "a.txt").write_bytes(b"hello\n")
    server = make_server(str(tmp_path), port=0, log=lambda line: None)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def test_serve_answers_only_requests_addressed_to_this_machine(served):
    port = served
    for host in (f"localhost:{port}", f"127.0.0.1:{port}", f"[::1]:{port}",
                 f"LOCALHOST:{port}"):
        assert http_get(port, "/a.txt", host) == (200, b"hello\n"), host
    for host in ("evil.example", f"evil.example:{port}", "localhost", f"localhost:{port + 1}",
                 f"127.0.0.1.evil.example:{port}", ""):
        status, body = http_get(port, "/a.txt", host)
        assert status == 403 and b"hello" not in body, host
    # No Host header at all (HTTP/1.0 allows it): refused too.
    import socket
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"GET /a.txt HTTP/1.0\r\n\r\n")
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
    assert reply.startswith(b"HTTP/1.0 403") and b"hello" not in reply
