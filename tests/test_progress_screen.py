"""Progress bars as a person sees them: real commands run under a pseudo-terminal, their
bytes played through the pyte terminal emulator, and the screen read back.

One live display per command: one line per split, each ending at its full n/n count, no
line printed twice (rich used to print every earlier split's line again whenever a new
split started), counts readable at 50 columns, and counts that move every fraction of
a second even while a slow writer (level-9 gzip) works through a big reader batch."""

import os
import pty
import re
import signal
import statistics
import sys
import time

import numpy as np
import pytest

from helpers import REPO, SAMPLE, make_idx_dir

pyte = pytest.importorskip("pyte")

ROWS = 40
COUNT = re.compile(r"^(\S+)\s.*?(\d+)/(\d+)\b")


def run_in_terminal(args, columns, cwd, prelude=None, interrupt_on=None):
    """Run `python -m mnistconv ARGS` (or `python -c PRELUDE ARGS`) on a pty of
    `columns` x ROWS, sending SIGINT once the output holds the bytes `interrupt_on`.
    Returns the exit code and [(seconds since start, bytes)] as the terminal received
    them."""
    started = time.monotonic()
    pid, fd = pty.fork()
    if pid == 0:  # the child: stdout and stderr are the pty
        try:
            import fcntl
            import struct
            import termios
            fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, columns, 0, 0))
            env = {k: v for k, v in os.environ.items()
                   if k not in ("NO_COLOR", "FORCE_COLOR", "TERM", "COLUMNS", "LINES")}
            env.update(TERM="xterm-256color", COLUMNS=str(columns), LINES=str(ROWS),
                       PYTHONPATH=str(REPO))
            os.chdir(cwd)
            how = ["-c", prelude] if prelude else ["-m", "mnistconv"]
            os.execve(sys.executable, [sys.executable, *how, *map(str, args)], env)
        finally:
            os._exit(127)
    chunks = []
    while True:
        try:
            data = os.read(fd, 1 << 16)
        except OSError:  # EIO: the child closed the pty
            break
        if not data:
            break
        chunks.append((time.monotonic() - started, data))
        if interrupt_on and interrupt_on in b"".join(c for _, c in chunks):
            os.kill(pid, signal.SIGINT)
            interrupt_on = None
    os.close(fd)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), chunks


def screens(chunks, columns):
    """[(time, lines)] after each chunk, and the final screen's non-blank lines."""
    screen = pyte.Screen(columns, ROWS)
    stream = pyte.ByteStream(screen)
    seen = []
    for t, data in chunks:
        stream.feed(data)
        seen.append((t, [line.rstrip() for line in screen.display]))
    return seen, [line.rstrip() for line in screen.display if line.strip()]


def bar_lines(lines):
    return [line for line in lines if COUNT.match(line)]


def counts(lines):
    return [(m.group(1), int(m.group(2)), int(m.group(3)))
            for m in map(COUNT.match, lines) if m]


@pytest.mark.parametrize("columns", [80, 50])
def test_one_line_per_split_ending_at_its_count(tmp_path, columns):
    code, chunks = run_in_terminal(["idx-to-npz", SAMPLE, "out.npz"], columns, tmp_path)
    assert code == 0
    _, final = screens(chunks, columns)
    bars = bar_lines(final)
    assert counts(bars) == [("train", 1000, 1000), ("test", 200, 200)], final
    assert len(set(final)) == len(final), final
    # Readable: the count is whole (not cut or wrapped), and the line fits.
    for line, count in zip(bars, ("1000/1000", "200/200")):
        assert re.search(rf"\s{count}(\s|$)", line) and len(line) <= columns, line
    # The summary comes after the bars, not among them.
    assert final.index(bars[-1]) < next(i for i, line in enumerate(final)
                                       if line.startswith("idx -> npz: "))
    if columns == 80:
        assert "━" in bars[0]  # room for the bar
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.npz"]


def test_many_splits_are_each_drawn_once(tmp_path):
    """pack browser: five tasks (four splits, then gzip) in one display."""
    args = ["pack", "browser", SAMPLE, "pack", "--train-per-class", 10,
            "--validation-per-class", 2, "--test-per-class", 2, "--validation-size", 100]
    for columns in (80, 50):
        code, chunks = run_in_terminal(args + (["--force"] if columns == 50 else []),
                                       columns, tmp_path)
        assert code == 0
        _, final = screens(chunks, columns)
        assert counts(bar_lines(final)) == [
            ("train", 100, 100), ("validation", 20, 20), ("test", 20, 20),
            ("test-full", 200, 200), ("gzip", 4, 4)], final
        assert len(set(final)) == len(final), final
        assert final[5].startswith("browser pack in pack: "), final


def test_compare_draws_its_bars_before_the_report():
    sample = os.path.relpath(SAMPLE, REPO)
    code, chunks = run_in_terminal(["compare", sample, sample], 50, REPO)
    assert code == 0
    _, final = screens(chunks, 50)
    assert counts(final[:2]) == [("train", 1000, 1000), ("test", 200, 200)], final
    assert final[2:5] == [f"A: {sample} (idx)", f"B: {sample} (idx)",
                          "train: 1000 vs 1000 images, 28x28"], final
    assert final[-1] == "result: equal (tolerance 0)"
    assert len(bar_lines(final)) == 2  # "  labels: 1000/1000 agree" is indented


# The child's writes into the npz archive take as long as level-9 gzip of MNIST does
# (about 6000 images a second): a slow writer, timed by the clock rather than by how
# busy the machine running the tests is.
SLOW_WRITER = """
import sys, time, zipfile
write = zipfile._ZipWriteFile.write
def slow(self, data):
    time.sleep(len(memoryview(data).cast("B")) / (6000 * 784))
    return write(self, data)
zipfile._ZipWriteFile.write = slow
from mnistconv.cli import main
sys.argv[0] = "mnistconv"
main()
"""


def test_counts_move_while_a_slow_writer_works(tmp_path):
    """A reader batch is 8192 images: the count used to sit at 0/10000 until the writer
    had taken all of them (more than a second here). Now the writer is handed pieces of
    about 0.05 s of work, and rich redraws 10 times a second."""
    rng = np.random.default_rng(5)
    images = rng.integers(0, 256, (10000, 28, 28), dtype=np.uint8)
    labels = (np.arange(10000) % 10).astype(np.uint8)
    make_idx_dir(tmp_path / "src", images, labels)
    make_idx_dir(tmp_path / "src", images[:200], labels[:200], split="test")
    code, chunks = run_in_terminal(["idx-to-npz", "src", "out.npz"], 80, tmp_path,
                                   prelude=SLOW_WRITER)
    assert code == 0
    seen, final = screens(chunks, 80)
    assert counts(bar_lines(final)) == [("train", 10000, 10000), ("test", 200, 200)]
    changes = []  # (time, count) each time the train count changed on screen
    for t, lines in seen:
        for name, done, _ in counts(lines):
            if name == "train" and (not changes or changes[-1][1] != done):
                changes.append((t, done))
    steps = [c for _, c in changes]
    assert steps[0] == 0 and steps[-1] == 10000 and steps == sorted(steps), changes
    gaps = [b[0] - a[0] for a, b in zip(changes, changes[1:])]
    # Before: 0, 8192, 10000. Now a new count about every 0.1 s (a bound on the worst
    # gap leaves room for a busy machine).
    assert len(steps) >= 10, changes
    assert statistics.median(gaps) <= 0.2, gaps
    assert max(gaps) <= 0.5, gaps
    with np.load(tmp_path / "out.npz") as out:  # the pieces make the same arrays
        assert np.array_equal(out["x_train"], images)
        assert np.array_equal(out["y_train"], labels)


def test_an_interrupted_command_ends_its_display_before_the_message(tmp_path):
    images = np.zeros((10000, 28, 28), np.uint8)
    labels = (np.arange(10000) % 10).astype(np.uint8)
    make_idx_dir(tmp_path / "src", images, labels)
    code, chunks = run_in_terminal(["idx-to-npz", "src", "out.npz"], 80, tmp_path,
                                   prelude=SLOW_WRITER, interrupt_on=b"/10000")
    assert code == 130
    _, final = screens(chunks, 80)
    assert len(final) == 2 and final[1] == "Interrupted.", final
    (name, done, total), = counts(final[:1])
    assert (name, total) == ("train", 10000) and done < total
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src"]


def test_iter_batches_asks_for_small_pieces_only_while_drawing():
    """What the display relies on: Progress.batch caps the reader's batches and
    Progress.step cuts them for the writer; without a display, batches are as read."""
    from mnistconv.model.records import ArraySplit, Progress, iter_batches

    class Recording(ArraySplit):
        def batches(self, batch_size=8192):
            self.asked = batch_size
            return super().batches(batch_size)

    class Drawing(Progress):
        batch, step = 300, 128

        def __init__(self):
            self.advances = []

        def advance(self, n):
            self.advances.append(n)

    images = np.arange(1000 * 4, dtype=np.uint8).reshape(1000, 2, 2)
    split = Recording("train", images, np.arange(1000) % 10)
    plain = [len(b) for b in iter_batches(split)]
    assert (split.asked, plain) == (8192, [1000])
    drawing = Drawing()
    pieces = list(iter_batches(split, drawing))
    assert split.asked == 300
    assert [len(b) for b in pieces] == [128, 128, 44] * 3 + [100]
    assert drawing.advances == [len(b) for b in pieces]
    np.testing.assert_array_equal(np.concatenate([b.images for b in pieces]), images)
    np.testing.assert_array_equal(np.concatenate([b.indices for b in pieces]),
                                  np.arange(1000))
