"""Signals end a run at once and as documented, from the first moment to the last:
SIGINT exits 130 with "Interrupted.", SIGTERM 143, no traceback, no output left, even
while the command is still importing (a second on a loaded machine) and while a gzip
writer is deflating. (test_reliability.py interrupts every writer part-way.)"""

import io
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from helpers import REPO, SAMPLE
from mnistconv.io import parallel_gzip
from mnistconv.model.records import ArraySplit, Dataset

# Run in the child before the command's own code: send the signal named by
# MNISTCONV_TEST_SIGNAL ("<module>:<SIGNAME>") to itself as that module is imported, the
# moment a user's Ctrl-C lands while the command starts up (no sleeping, no timing).
SITECUSTOMIZE = '''
import os, signal, sys
_module, _name = os.environ["MNISTCONV_TEST_SIGNAL"].split(":")
_sent = []
def _hook(event, args):
    if event == "import" and args[0] == _module and not _sent:
        _sent.append(1)
        os.kill(os.getpid(), getattr(signal, _name))
sys.addaudithook(_hook)
'''
LAUNCHERS = {"python -m": [sys.executable, "-m", "mnistconv"],
             "script": [str(Path(sys.executable).parent / "mnistconv")]}


def _default_sigint():
    # A background shell starts children with SIGINT ignored; a user's terminal does not.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("launcher", list(LAUNCHERS))
@pytest.mark.parametrize("module", ["typing", "mnistconv.formats.registry", "click", "numpy"])
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_signal_during_start_up(tmp_path, launcher, module, signum):
    if launcher == "script" and not Path(LAUNCHERS["script"][0]).exists():
        pytest.skip("no console script beside the interpreter")
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(SITECUSTOMIZE)
    env = dict(os.environ, PYTHONPATH=f"{hook}{os.pathsep}{REPO}", TMPDIR=str(tmp_path),
               MNISTCONV_TEST_SIGNAL=f"{module}:{signal.Signals(signum).name}")
    env.pop("PYTEST_CURRENT_TEST", None)
    out = tmp_path / "out.npz"
    result = subprocess.run(LAUNCHERS[launcher] + ["convert", str(SAMPLE), str(out)],
                            capture_output=True, env=env, preexec_fn=_default_sigint,
                            timeout=300)
    said = "Interrupted.\n" if signum == signal.SIGINT else ""
    assert (result.returncode, result.stderr.decode()) == (128 + signum, said)
    assert result.stdout == b""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hook"]


def test_a_library_host_keeps_its_own_signal_handling():
    """The start-up guard is the program's: importing mnistconv anywhere else (this
    test process, a child running python -c) leaves SIGINT and SIGTERM alone."""
    code = ("import signal, mnistconv, mnistconv.cli; "
            "print(signal.getsignal(signal.SIGINT) is signal.default_int_handler, "
            "signal.getsignal(signal.SIGTERM) is signal.SIG_DFL)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True,
                            env=dict(os.environ, PYTHONPATH=str(REPO)),
                            preexec_fn=_default_sigint, timeout=300)
    assert result.stdout == b"True True\n", result.stderr.decode()


class _Interrupt(BaseException):
    pass


def test_gzip_handles_ctrl_c_within_a_slice_of_a_large_write(monkeypatch):
    """DeflateWriter (GDMNIST's .bin.gz) gets a whole batch, tens of MB, in one write:
    deflated in one call at level 9 the signal waited for all of it (20 s under load).
    Here a signal arrives as zlib starts: the write stops after one slice."""
    fed = []
    previous = signal.signal(signal.SIGUSR1, lambda *_: (_ for _ in ()).throw(_Interrupt()))

    class Spy:
        def __init__(self, real):
            self.real = real

        def compress(self, data):
            fed.append(len(data))
            if len(fed) == 1:
                os.kill(os.getpid(), signal.SIGUSR1)  # handled when this call returns
            return self.real.compress(data)

        def flush(self):
            return self.real.flush()

    try:
        writer = parallel_gzip.DeflateWriter(io.BytesIO())
        writer.zlib = Spy(writer.zlib)
        with pytest.raises(_Interrupt):
            writer.write(bytes(16 << 20))
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert sum(fed) <= 1 << 20, f"{sum(fed):,} bytes deflated before the signal was handled"


def test_idx_gzip_writer_stops_without_waiting_for_its_threads(tmp_path, monkeypatch):
    """An error (or Ctrl-C) in `--to idx --gzip` aborts its parallel gzip writers, which
    return while a block is still being deflated on a thread."""
    import mnistconv
    started, release = threading.Event(), threading.Event()

    def stuck(block, dictionary, level, last):
        started.set()
        release.wait()
        return b""

    class Failing(ArraySplit):
        def batches(self, batch_size=None):
            yield from super().batches(1000)
            assert started.wait(60)
            raise _Interrupt()

    monkeypatch.setattr(parallel_gzip, "deflate_block", stuck)
    monkeypatch.setattr(parallel_gzip, "default_workers", lambda: 2)
    images = np.random.default_rng(0).integers(0, 255, (6000, 28, 28), np.uint8)
    split = Failing("train", images, np.zeros(6000, np.uint8))
    failed = []

    def write():
        try:
            mnistconv.write(Dataset("x", {"train": split}), tmp_path / "out/", "idx",
                            gzip=True)
        except _Interrupt:
            failed.append(True)

    writing = threading.Thread(target=write)
    writing.start()
    try:
        writing.join(60)  # a guard against hanging, not a timing: nothing releases it
        assert not writing.is_alive(), "the writer waited for the block being deflated"
        assert failed == [True]
    finally:
        release.set()
        writing.join()
    assert not (tmp_path / "out").exists()
