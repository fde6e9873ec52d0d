"""A --force commit killed at any step leaves the earlier set or the new set, whole.

The commit path counts its steps; MNISTCONV_TEST_KILL_AT=N makes the Nth SIGKILL the
process (mnistconv.io.journal.step). Each test kills a real `mnistconv convert --force`
at every step in turn, then reads the output (a read finishes a dead run's commit
first) and compares every file beside it, by name and SHA-256, with the earlier set
and with the set an uninterrupted run makes.
"""

import hashlib
import os
import shutil
import signal
import subprocess
import sys

import pytest

import mnistconv
from helpers import REPO, make_idx_dir, small_digits
from mnistconv.io.staging import STAGING_MARK

JOURNAL_MARK = ".mnistconv-journal-"


def _input(folder, seed, train, test):
    make_idx_dir(folder, *small_digits(train, seed=seed))
    make_idx_dir(folder, *small_digits(test, seed=seed + 1), split="test")
    return folder


def _convert(args, cwd, kill_at=None):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("MNISTCONV_TEST_KILL_AT", None)
    if kill_at is not None:
        env["MNISTCONV_TEST_KILL_AT"] = str(kill_at)
    return subprocess.run([sys.executable, "-m", "mnistconv", "convert", *map(str, args),
                           "-q"], cwd=cwd, env=env, capture_output=True)


def _set(folder):
    """{path: sha256} of every file under folder but a dead run's staging leftovers
    (never data: readers skip them, the next run removes them). A commit journal is
    counted: none may be left once the output is read."""
    found = {}
    for top, dirs, names in os.walk(folder):
        dirs[:] = [d for d in dirs if STAGING_MARK not in d]
        for name in names:
            if STAGING_MARK not in name:
                path = os.path.join(top, name)
                with open(path, "rb") as f:
                    found[os.path.relpath(path, folder)] = hashlib.sha256(f.read()).hexdigest()
    return found


CASES = {
    # Parquet with README.md, croissant.json, SHA256SUMS and a card beside it: the new
    # set has another shard count and other input.
    "parquet": (["--to", "parquet", "--card", "--sha256sums"], "out",
                ["--shards", "2"]),
    # TFRecord train and test shard sets with their .idx index files.
    "tfrecord": (["--shards", "2", "--index-files", "--sha256sums", "--card"],
                 "out/mnist.tfrecord", ["--shards", "3"]),
    # An ImageFolder tree (a folder swapped whole) with its croissant.json and a card,
    # and a file of the user's inside it, which both sets keep.
    "imagefolder": (["--to", "imagefolder", "--card"], "out", []),
}


@pytest.mark.parametrize("case", list(CASES))
def test_sigkill_at_every_commit_step_leaves_one_whole_set(tmp_path, case):
    options, dst, other = CASES[case]
    old_input = _input(tmp_path / "in-old", 1, 40, 20)
    new_input = _input(tmp_path / "in-new", 5, 30, 24)
    pristine = tmp_path / "pristine"
    pristine.mkdir()
    made = _convert([old_input, dst, *options], pristine)
    assert made.returncode == 0, made.stderr
    if case == "imagefolder":
        (pristine / "out" / "notes.txt").write_text("mine\n")
    work = tmp_path / "work"
    args = [new_input, dst, *options, *other, "--force"]

    def fresh():
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(pristine, work, symlinks=True)

    fresh()
    old = _set(work)
    done = _convert(args, work)
    assert done.returncode == 0, done.stderr
    new = _set(work)
    assert old != new and not any(JOURNAL_MARK in p for p in new)
    seen = []
    for kill_at in range(1, 200):
        fresh()
        result = _convert(args, work, kill_at)
        if result.returncode == 0:
            break
        assert result.returncode == -signal.SIGKILL, (kill_at, result.stderr)
        mnistconv.read(work / dst)  # finishes a dead run's commit, then reads
        after = _set(work)
        assert after in (old, new), (case, kill_at, sorted(set(after) ^ set(old)),
                                     sorted(set(after) ^ set(new)))
        seen.append("old" if after == old else "new")
    else:
        pytest.fail("the commit never finished")
    assert _set(work) == new
    # Killed before its journal: the earlier set; after: the new one, completed.
    assert seen and seen[0] == "old" and seen[-1] == "new", seen
    if case == "imagefolder":
        assert (work / "out" / "notes.txt").read_text() == "mine\n"


def test_the_next_run_finishes_a_dead_commit_before_it_stages(tmp_path):
    """No read in between: the next conversion into the same folder completes the killed
    run's commit (its staged files are the new set, not leftovers), then commits its own."""
    old_input = _input(tmp_path / "in-old", 1, 40, 20)
    new_input = _input(tmp_path / "in-new", 5, 30, 24)
    work = tmp_path / "work"
    work.mkdir()
    assert _convert([old_input, "out/m.tfrecord", "--shards", "2", "--index-files"],
                    work).returncode == 0
    killed = _convert([new_input, "out/m.tfrecord", "--shards", "3", "--index-files",
                       "--force"], work, kill_at=5)
    assert killed.returncode == -signal.SIGKILL
    assert any(n.startswith(JOURNAL_MARK) for n in os.listdir(work / "out"))
    again = _convert([new_input, "out/other.tfrecord"], work)
    assert again.returncode == 0, again.stderr
    names = sorted(os.listdir(work / "out"))
    assert names == sorted(
        [f"m-{s}.tfrecord-{i:05d}-of-00003{x}" for s in ("test", "train") for i in range(3)
         for x in ("", ".idx")] + ["other-test.tfrecord", "other-train.tfrecord"])


# Kills the run at its Nth rename or removal, wherever it is (no hook in the code).
_KILL_AT_NTH_CHANGE = """
import os, shutil, signal, sys
n, count = int(sys.argv[1]), [0]
def cut(call):
    def counted(*args, **kwargs):
        count[0] += 1
        if count[0] == n:
            os.kill(os.getpid(), signal.SIGKILL)
        return call(*args, **kwargs)
    return counted
os.replace, os.rename, os.unlink = cut(os.replace), cut(os.rename), cut(os.unlink)
shutil.rmtree = cut(shutil.rmtree)
from mnistconv.cli import main
main(sys.argv[2:])
"""


def test_killed_at_any_rename_or_removal_parquet_with_its_card(tmp_path):
    """The same, cut at each filesystem change of the whole run (the issue's case:
    Parquet with README.md and a card, another input and shard count)."""
    options, dst, other = CASES["parquet"]
    pristine = tmp_path / "pristine"
    pristine.mkdir()
    assert _convert([_input(tmp_path / "a", 1, 40, 20), dst, *options],
                    pristine).returncode == 0
    work = tmp_path / "work"
    args = ["convert", _input(tmp_path / "b", 5, 30, 24), dst, *options, *other,
            "--force", "-q"]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("MNISTCONV_TEST_KILL_AT", None)
    shutil.copytree(pristine, work)
    old = _set(work)
    assert _convert(args[1:-1], work).returncode == 0
    new = _set(work)
    kills = 0
    for n in range(1, 300):
        shutil.rmtree(work)
        shutil.copytree(pristine, work)
        result = subprocess.run([sys.executable, "-c", _KILL_AT_NTH_CHANGE, str(n),
                                 *map(str, args)], cwd=work, env=env, capture_output=True)
        if result.returncode == 0:
            break
        assert result.returncode == -signal.SIGKILL, result.stderr
        kills += 1
        mnistconv.read(work / dst)
        after = _set(work)
        assert after in (old, new), (n, sorted(set(after) ^ set(old)),
                                     sorted(set(after) ^ set(new)))
    assert kills > 3 and _set(work) == new
