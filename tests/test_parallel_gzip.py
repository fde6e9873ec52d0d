"""parallel_gzip: deflate on several threads into one standard gzip file.

The bytes must depend only on the data and the level (never on the thread count or the
write sizes), be read by every gzip reader (Python's gzip and zlib, GNU gzip -t and
zcat, idx2numpy), equal gzip.compress(data, level, mtime=0) up to one block, and IDX
--gzip/--gzip-level must use it while GDMNIST .bin.gz keeps the single-stream bytes
its published hashes describe.
"""

import gzip
import io
import shutil
import subprocess
import threading
import zlib

import numpy as np
import pytest

from mnistconv.io import parallel_gzip as pg
from mnistconv.errors import UsageError
from helpers import files_in, idx_bytes, make_idx_dir, run, small_digits

SMALL_BLOCK = 16384  # many cuts from little data; the format itself uses pg.BLOCK


def mnist_like(n, seed=3):
    """Bytes that compress like MNIST (runs of zeros, repeated strokes), so matches
    reach across block cuts."""
    rng = np.random.default_rng(seed)
    images = np.zeros((n, 28, 28), np.uint8)
    strokes = rng.integers(0, 256, (16, 8, 12), dtype=np.uint8)
    for i in range(n):
        r, c = rng.integers(2, 17, 2)
        images[i, r:r + 8, c:c + 12] = strokes[i % 16]
    return images


def chunked(data, sizes):
    """data cut into pieces of the given sizes, cycled (the last piece is the rest)."""
    out, i, k = [], 0, 0
    while i < len(data):
        out.append(data[i:i + sizes[k % len(sizes)]])
        i += sizes[k % len(sizes)]
        k += 1
    return out


def compress_in_pieces(pieces, level, threads, block_size=SMALL_BLOCK):
    out = io.BytesIO()
    with pg.ParallelGzipWriter(out, level, threads, block_size) as writer:
        for piece in pieces:
            assert writer.write(piece) == len(piece)
    return out.getvalue()


@pytest.mark.parametrize("level", [1, 6, 9])
def test_bytes_depend_only_on_data_and_level(level):
    data = mnist_like(300).tobytes()  # 235,200 bytes: 15 cuts at 16 KiB
    reference = pg.compress(data, level, threads=1, block_size=SMALL_BLOCK)
    for threads in (1, 2, 4):
        for sizes in ([len(data)], [1], [7, 16384, 100000], [SMALL_BLOCK], [SMALL_BLOCK + 1]):
            pieces = chunked(data, sizes) if sizes != [1] else chunked(data[:40000], [1])
            expected = reference if sizes != [1] else pg.compress(
                data[:40000], level, 1, SMALL_BLOCK)
            assert compress_in_pieces(pieces, level, threads) == expected, (threads, sizes)
    assert gzip.decompress(reference) == data
    assert reference[:10] == gzip.compress(b"", level, mtime=0)[:10]  # mtime 0, no name
    # Several blocks really were cut (a single stream would equal gzip.compress).
    assert reference != gzip.compress(data, level, mtime=0)


@pytest.mark.parametrize("level", range(1, 10))
def test_up_to_one_block_it_is_gzip_compress(level):
    rng = np.random.default_rng(level)
    for data in (b"", b"x", mnist_like(20).tobytes()[:SMALL_BLOCK],
                 rng.integers(0, 4, SMALL_BLOCK, dtype=np.uint8).tobytes()):
        for threads in (1, 2):
            assert pg.compress(data, level, threads, SMALL_BLOCK) == \
                gzip.compress(data, level, mtime=0)


def test_default_block_size_and_exact_multiples():
    """The format's own 1 MiB blocks, data ending exactly on a cut and one byte past."""
    base = mnist_like(2700).tobytes()  # 2,116,800 bytes
    for data in (base[:2 * pg.BLOCK], base[:2 * pg.BLOCK + 1], base):
        one = pg.compress(data, 6, threads=1)
        assert pg.compress(data, 6, threads=2) == one
        assert pg.compress(data, 6, threads=3) == one
        assert gzip.decompress(one) == data
        # Trailer: CRC-32 and length of the data, little-endian.
        assert one[-8:] == zlib.crc32(data).to_bytes(4, "little") + \
            len(data).to_bytes(4, "little")


def test_preset_dictionary_keeps_matches_across_cuts():
    """A block primed with the 32 KiB before it finds repeats across the cut: the size
    stays within 1 % of one long stream, where blocks compressed alone lose much more."""
    rng = np.random.default_rng(5)
    pattern = rng.integers(0, 256, 6000, dtype=np.uint8).tobytes()
    data = pattern * 60  # 360,000 bytes of one 6000-byte random pattern
    single = len(gzip.compress(data, 9, mtime=0))
    parallel = len(pg.compress(data, 9, 2, SMALL_BLOCK))
    alone = sum(len(zlib.compress(data[i:i + SMALL_BLOCK], 9))
                for i in range(0, len(data), SMALL_BLOCK))
    assert parallel < single * 1.01 + 23 * 5  # + an empty stored block per cut
    assert alone > 5 * parallel


def test_readers_accept_it(tmp_path):
    data = mnist_like(3000).tobytes()
    path = tmp_path / "x.gz"
    path.write_bytes(pg.compress(data, 9, 2))
    assert gzip.decompress(path.read_bytes()) == data
    with gzip.open(path, "rb") as f:  # small reads, as streaming readers do
        assert b"".join(iter(lambda: f.read(4099), b"")) == data
    assert zlib.decompressobj(31).decompress(path.read_bytes()) == data
    if not shutil.which("gzip"):
        pytest.skip("GNU gzip not installed")
    assert subprocess.run(["gzip", "-t", str(path)], capture_output=True).returncode == 0
    zcat = subprocess.run(["gzip", "-dc", str(path)], capture_output=True)
    assert (zcat.returncode, zcat.stderr) == (0, b"")
    assert zcat.stdout == data


def test_levels_are_checked():
    for bad in (0, 10, -1, "9", 9.0, True, None):
        with pytest.raises(UsageError) as e:
            pg.ParallelGzipWriter(io.BytesIO(), bad)
        assert str(e.value) == (f"gzip level {bad!r} is not one of 1..9; use --gzip-level "
                                "1 (fastest) to 9 (smallest, the default)")


def gzip_threads():
    return [t for t in threading.enumerate() if t.name.startswith("mnistconv-gzip")]


def test_threads_end_with_the_writer():
    data = mnist_like(200).tobytes()
    out = io.BytesIO()
    with pytest.raises(RuntimeError):
        with pg.ParallelGzipWriter(out, 9, 2, SMALL_BLOCK) as writer:
            writer.write(data)
            assert gzip_threads()
            raise RuntimeError("the reader failed")
    for thread in gzip_threads():  # each ends once its block is deflated
        thread.join()
    # No trailer was written: a reader sees a cut stream, not a short valid file.
    with pytest.raises(EOFError):
        gzip.decompress(out.getvalue())
    pg.compress(data, 9, 2, SMALL_BLOCK)
    assert gzip_threads() == []
    # One block: no thread is started at all.
    pg.compress(data[:1000], 9, 4, SMALL_BLOCK)
    assert gzip_threads() == []


def test_abort_does_not_wait_for_blocks_being_deflated(monkeypatch):
    """Ctrl-C in `--to idx --gzip` aborts the writer: it returns while a block is still
    on its thread (one block at level 9 on a loaded machine took seconds, and the run
    kept going 30 s after Ctrl-C), and the blocks queued behind it are never started."""
    started, release = threading.Event(), threading.Event()
    calls = []

    def stuck(block, dictionary, level, last):
        calls.append(len(block))
        started.set()
        release.wait()
        return b""

    monkeypatch.setattr(pg, "deflate_block", stuck)
    writer = pg.ParallelGzipWriter(io.BytesIO(), 9, 2, SMALL_BLOCK)
    writer.write(bytes(SMALL_BLOCK * 3 + 1))  # 3 blocks: 2 on the threads, 1 queued
    try:
        assert started.wait(60)
        aborting = threading.Thread(target=writer.abort)
        aborting.start()
        aborting.join(60)  # a guard against hanging, not a timing: it never releases
        assert not aborting.is_alive(), "abort() waited for the block being deflated"
        assert writer.pool is None and not writer.queue
    finally:
        release.set()
    for thread in gzip_threads():
        thread.join()
    assert len(calls) == 2  # the queued third block was never started


def test_in_flight_blocks_are_bounded():
    """Blocks are written out as they complete, at most 2 per thread wait: memory is a
    few blocks whatever the input."""
    data = mnist_like(400).tobytes()  # 313,600 bytes: 19 blocks of 16 KiB
    out = io.BytesIO()
    writer = pg.ParallelGzipWriter(out, 1, 2, SMALL_BLOCK)
    most = 0
    for piece in chunked(data, [SMALL_BLOCK]):
        writer.write(piece)
        most = max(most, len(writer.queue))
    writer.close()
    assert most <= 4
    assert gzip.decompress(out.getvalue()) == data


# --- through the IDX writer and the command line -------------------------------------------

def test_idx_gzip_is_the_parallel_format_and_idx2numpy_reads_it(tmp_path):
    images = mnist_like(3000)  # 2.35 MB of images: three blocks
    labels = (np.arange(3000) % 10).astype(np.uint8)
    make_idx_dir(tmp_path / "src", images, labels)
    for out, extra, level in (("a", [], 9), ("b", ["--gzip-level", "6"], 6),
                              ("c", ["--gzip-level", "1"], 1)):
        result = run("convert", tmp_path / "src", tmp_path / out, "--to", "idx", "--gzip",
                     "-q", *extra)
        assert (result.returncode, result.stderr) == (0, b"")
        assert files_in(tmp_path / out) == ["train-images-idx3-ubyte.gz",
                                            "train-labels-idx1-ubyte.gz"]
        data = (tmp_path / out / "train-images-idx3-ubyte.gz").read_bytes()
        assert data == pg.compress(idx_bytes(images), level)
        labels_gz = (tmp_path / out / "train-labels-idx1-ubyte.gz").read_bytes()
        assert labels_gz == gzip.compress(idx_bytes(labels), level, mtime=0)  # one block
    assert len({(tmp_path / o / "train-images-idx3-ubyte.gz").read_bytes()
                for o in "abc"}) == 3

    idx2numpy = pytest.importorskip("idx2numpy")
    with gzip.open(tmp_path / "a" / "train-images-idx3-ubyte.gz", "rb") as f:
        np.testing.assert_array_equal(idx2numpy.convert_from_file(f), images)
    if shutil.which("gzip"):
        check = subprocess.run(["gzip", "-t", *map(str, (tmp_path / "b").iterdir())],
                               capture_output=True)
        assert (check.returncode, check.stderr) == (0, b"")


def test_gzip_level_usage_errors_write_nothing(tmp_path):
    images, labels = small_digits()
    make_idx_dir(tmp_path / "src", images, labels)
    cases = {
        # Option ranges are checked from the format's declaration, in one style.
        ("--gzip", "--gzip-level", "0"): "Error: --gzip-level must be between 1 and 9, "
        "not 0; pass a value it accepts (see --help)\n",
        ("--gzip", "--gzip-level", "10"): "Error: --gzip-level must be between 1 and 9, "
        "not 10; pass a value it accepts (see --help)\n",
        ("--gzip-level", "6"): "Error: --gzip-level applies only to --gzip output; "
        "add --gzip\n",
    }
    for args, message in cases.items():
        result = run("convert", tmp_path / "src", tmp_path / "out", "--to", "idx", *args)
        assert (result.returncode, result.stdout, result.stderr.decode()) == (2, b"", message)
        assert files_in(tmp_path) == ["src"]
    result = run("convert", tmp_path / "src", tmp_path / "x.bin.gz", "--to", "gdmnist",
                 "--gzip", "--gzip-level", "6")
    assert (result.returncode, result.stderr.decode()) == (
        2, "Error: --gzip-level does not apply to reading idx or writing gdmnist; "
        "drop it\n")
    assert files_in(tmp_path) == ["src"]


def test_gdmnist_bin_gz_stays_one_level_9_stream(tmp_path):
    """Browser packs' .bin.gz have published hashes: they keep gzip -9n's single stream
    even where the data spans several parallel blocks."""
    images = mnist_like(3000)
    make_idx_dir(tmp_path / "src", images, (np.arange(3000) % 10).astype(np.uint8))
    result = run("convert", tmp_path / "src", tmp_path / "x.bin.gz", "--to", "gdmnist",
                 "--gzip", "-q")
    assert (result.returncode, result.stderr) == (0, b"")
    data = (tmp_path / "x.bin.gz").read_bytes()
    assert len(gzip.decompress(data)) > 2 * pg.BLOCK
    # Python's GzipFile wrapper (OS byte 255), as the published files have.
    single = io.BytesIO()
    with gzip.GzipFile(fileobj=single, mode="wb", compresslevel=9, mtime=0) as f:
        f.write(gzip.decompress(data))
    assert data == single.getvalue()
