"""process.py's tuning is for processes mnistconv owns: the command line asks OpenBLAS
for one thread (numpy's import is then cheaper), keeps a user's choice, and the library
changes no environment."""

import os
import subprocess
import sys

from helpers import REPO

PROBE = r'''
import os, sys
{setup}
print(os.environ.get("OPENBLAS_NUM_THREADS", "unset"))
'''


def probe(setup, env_value=None):
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if env_value is not None:
        env["OPENBLAS_NUM_THREADS"] = env_value
    out = subprocess.run([sys.executable, "-c", PROBE.format(setup=setup)], cwd=REPO,
                         env=env, capture_output=True, text=True, check=True)
    return out.stdout.strip()


def test_the_command_line_asks_for_one_blas_thread_before_numpy_loads():
    setup = ("from mnistconv.workers.process import tune_command_line; tune_command_line(); "
             "assert 'numpy' not in sys.modules or print('numpy was loaded')")
    assert probe(setup) == "1"


def test_a_users_blas_threads_are_kept():
    setup = "from mnistconv.workers.process import tune_command_line; tune_command_line()"
    assert probe(setup, "3") == "3"


def test_after_numpy_is_loaded_nothing_changes():
    setup = ("import numpy; from mnistconv.workers.process import single_blas_thread; "
             "single_blas_thread()")
    assert probe(setup) == "unset"


def test_the_library_sets_no_blas_threads():
    setup = ("import mnistconv; mnistconv.read('examples/data/mnist-sample'); "
             "mnistconv.formats()")
    assert probe(setup) == "unset"


HEAP = r'''
import numpy as np, mnistconv
from mnistconv.model.records import ArraySplit, Dataset
from mnistconv.workers import process
{setup}
def write(side, channels, out):
    shape = (4, side, side) + ((channels,) if channels > 1 else ())
    split = ArraySplit("train", np.zeros(shape, np.uint8), np.arange(4) % 2)
    mnistconv.write(Dataset("npz", {{"train": split}}), out, format="npz")
write(28, 1, "small.npz")
print(process._heap_buffer >> 20, end=" ")
write(224, 3, "large.npz")
print(process._heap_buffer >> 20, process._tuned)
'''


def _heap(setup, tmp_path):
    out = subprocess.run([sys.executable, "-c", HEAP.format(setup=setup)], cwd=tmp_path,
                         env={**os.environ, "PYTHONPATH": str(REPO)},
                         capture_output=True, text=True, check=True)
    return out.stdout.strip()


def test_the_program_keeps_batches_in_the_heap_until_a_write_of_large_images(tmp_path):
    # MiB kept in the heap: 64 for 28 x 28 (a batch's arrays reused, not faulted in
    # anew), 4 from a write of 224 x 224 RGB images on (their freed buffers fragmented it)
    assert _heap("process.tune_command_line()", tmp_path) == "64 4 True"


def test_a_library_callers_malloc_is_left_alone(tmp_path):
    assert _heap("", tmp_path) == "64 64 False"
