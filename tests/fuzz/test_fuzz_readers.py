"""Every registered reader against hostile input: mutated and truncated real files, gzip
bombs and non-files. Each case must end in a MnistconvError with a one-line message, or
read cleanly with counts that add up, within the harness's time and memory bounds.

The number of cases comes from conftest.py: a short derandomized pass in `make test`,
10000 per reader and test in `make fuzz`. A failing input is saved (see harness.py) for
tests/fuzz/corpus/.
"""

import os
import re
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import mnistconv
from .harness import Workspace, check_case
from .mutations import LAYERS, MUTATIONS, bomb, mutate
from .seeds import copy_seed, files_of, readers, seeds

READERS = readers()


def fuzz_settings(fuzz_cases):
    cases, derandomize = fuzz_cases
    return settings(max_examples=cases, derandomize=derandomize, deadline=None,
                    database=None if derandomize else settings.default.database,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much],
                    print_blob=True)


def _mutated_case(work, fmt, seed_index, file_index, ops, layer, member):
    seed = seeds(fmt)[seed_index % len(seeds(fmt))]
    case = copy_seed(seed, work)
    files = files_of(case)
    victim = files[file_index % len(files)]
    victim.write_bytes(mutate(victim.read_bytes(), ops, layer, member))
    return case


@pytest.mark.parametrize("fmt", READERS)
def test_mutated_files(fmt, fuzz_cases):
    """Flipped bits, overwritten integers (huge, zero, off-by-one counts and sizes in both
    byte orders), inserted, deleted and duplicated ranges, in the raw file or inside its
    gzip/zip container; read as the format, or detected by content as the CLI does;
    half the cases also through `mnistconv info` (histogram, orientation hint, hashes)."""
    @fuzz_settings(fuzz_cases)
    @given(seed_index=st.integers(0, 63), file_index=st.integers(0, 15), ops=MUTATIONS,
           layer=LAYERS, member=st.integers(0, 7), detect=st.booleans(), cli=st.booleans())
    def case(seed_index, file_index, ops, layer, member, detect, cli):
        with Workspace() as work:
            path = _mutated_case(work, fmt, seed_index, file_index, ops, layer, member)
            check_case(path, None if detect else fmt, cli)
    case()


@pytest.mark.parametrize("fmt", READERS)
def test_truncated_files(fmt, fuzz_cases):
    """Every file of every seed cut at any length, raw or inside its container."""
    @fuzz_settings(fuzz_cases)
    @given(seed_index=st.integers(0, 63), file_index=st.integers(0, 15),
           cut=st.integers(0, 1 << 22), layer=LAYERS)
    def case(seed_index, file_index, cut, layer):
        with Workspace() as work:
            path = _mutated_case(work, fmt, seed_index, file_index, [("truncate", cut)],
                                 layer, 0)
            check_case(path, fmt)
    case()


def some_seeds(fmt, fuzz_cases):
    """All seeds in the long pass; in the short one, the first small and sample seeds
    (a bomb costs a second or so to decompress)."""
    cases, derandomize = fuzz_cases
    if not derandomize:
        return seeds(fmt)
    first = [s for s in seeds(fmt) if "-0" in str(s)] or seeds(fmt)
    return first[:3]


def some_files(seed, fuzz_cases):
    """A seed's files to replace: all in the long pass; in the short one, one of each
    kind (its depth in the seed and its name with digits as #), as an image folder's
    PNGs in class folders are one case, and IDX images and labels two."""
    files = files_of(seed)
    if not fuzz_cases[1]:
        return files
    kinds = {}
    for f in files:
        depth = len(f.relative_to(seed).parts) if f != Path(seed) else 0
        kinds.setdefault((depth, re.sub(r"\d+", "#", f.name)), f)
    return list(kinds.values())


@pytest.mark.parametrize("fmt", READERS)
def test_gzip_bombs(fmt, tmp_path, fuzz_cases):
    """Each file of each seed followed by 64 MiB of zeros in a second gzip member: far
    more than the header declares. Bounded by the harness (and by the reader stopping at
    the data it expects)."""
    for i, seed in enumerate(some_seeds(fmt, fuzz_cases)):
        for j, victim_rel in enumerate(some_files(seed, fuzz_cases)):
            work = tmp_path / f"{i}-{j}"
            work.mkdir()
            case = copy_seed(seed, work)
            victim = case / victim_rel.relative_to(seed) if case.is_dir() else case
            victim.write_bytes(bomb(victim.read_bytes()))
            check_case(case, fmt)
            shutil.rmtree(work)


def _special_inputs(work):
    """Things that are not regular files, named as a reader might expect."""
    empty = work / "empty-dir"
    empty.mkdir()
    fifo = work / "fifo"
    os.mkfifo(fifo)
    zero = work / "zero"
    zero.symlink_to("/dev/zero")
    loop = work / "loop"
    loop.symlink_to(loop)
    return {"empty directory": empty, "FIFO": fifo, "/dev/zero": Path("/dev/zero"),
            "symlink to /dev/zero": zero, "/dev/null": Path("/dev/null"),
            "symlink loop": loop, "missing": work / "missing", "empty file": _empty(work)}


def _empty(work):
    p = work / "empty.bin"
    p.write_bytes(b"")
    return p


@pytest.mark.parametrize("fmt", READERS + [None], ids=lambda f: f or "detect")
def test_non_files(fmt, tmp_path):
    """Directories, FIFOs (which block an open() forever if read), /dev/zero (endless),
    /dev/null, symlink loops, missing paths: a clear error, never a hang."""
    for what, path in _special_inputs(tmp_path).items():
        kind, message = check_case(path, fmt)
        assert kind == "error", f"{what}: read as {fmt} without an error"


@pytest.mark.parametrize("fmt", READERS)
def test_seed_files_replaced_by_non_files(fmt, tmp_path, fuzz_cases):
    """A seed directory (or the seed file) whose file is a FIFO, a symlink to /dev/zero,
    a directory or an empty file: detection and reading must not block or run forever."""
    for i, seed in enumerate(some_seeds(fmt, fuzz_cases)):
        for j, original in enumerate(some_files(seed, fuzz_cases)):
            for how in ("fifo", "dev-zero", "directory", "empty"):
                work = tmp_path / f"{i}-{j}-{how}"
                work.mkdir()
                case = copy_seed(seed, work)
                victim = case / original.relative_to(seed) if case.is_dir() else case
                victim.unlink()
                if how == "fifo":
                    os.mkfifo(victim)
                elif how == "dev-zero":
                    victim.symlink_to("/dev/zero")
                elif how == "directory":
                    victim.mkdir()
                else:
                    victim.write_bytes(b"")
                for as_fmt in (fmt, None):
                    check_case(case, as_fmt)
                shutil.rmtree(work)


@pytest.mark.parametrize("fmt", READERS)
def test_seeds_read_cleanly(fmt):
    """The unmutated seeds read without error: otherwise the fuzzing above only ever
    exercises the first check."""
    assert seeds(fmt), f"no seed inputs for {fmt}"
    for seed in seeds(fmt):
        kind, detail = check_case(seed, fmt)
        assert kind == "ok", f"{seed}: {detail}"
        assert mnistconv.read(str(seed)).format == fmt
