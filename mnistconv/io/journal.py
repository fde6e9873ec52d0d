"""The commit journal: what makes a commit of several steps survive SIGKILL.

A commit is a list of steps on paths that all lie under one folder:

- ["remove", path, id]: unlink path (rmtree for a folder) if it is still the entry id;
- ["move", src, dst, id]: rename src (a staged file, or an earlier file carried into a
  staged folder) to dst, replacing a file there, if src is still the entry id;
- ["swap", src, dst, id]: the staged folder src (entry id) takes the place of the
  folder dst in one step (renameat2 RENAME_EXCHANGE; else two renames), and the earlier
  folder is removed.

id is (st_dev, st_ino), so a step is recognised as done (dst is the entry) or as no
longer meant (src or path is another entry now), and running a step twice is harmless.
Before the first step of a commit of more than one, the steps are written, paths
relative to that folder, to `.mnistconv-journal-<pid>` there (whole: a temporary
renamed). The journal is the decision: from then on the commit only goes forward. If
the run dies, the next run staging in that folder, or any read of the output, carries
the steps out (complete()) before it removes a dead run's staging leftovers or reads a
byte, so the output is the earlier set or the new set, whole.

Only the Python side is guarded: the staged data is not fsynced, so this is about a
killed process (SIGKILL, OOM killer), not about a machine that loses power.
"""

import contextlib
import errno
import json
import os
import re
import shutil
import signal
import sys
from typing import Iterator, Optional

STAGING_MARK = ".mnistconv-tmp-"  # staging names (staging.py); never data, never carried
JOURNAL_MARK = ".mnistconv-journal-"
# Compiled on first use (re caches it): most folders hold no journal.
_JOURNAL_RE = re.escape(JOURNAL_MARK) + r"(\d+)(\.tmp)?$"
# Folders above a read's path searched for a dead run's journal (a card beside the
# output puts it one up; a Parquet or TFDS tree's files sit two or three down).
SEARCH_UP = 4

# Tests kill the process at the Nth step of the commit path (1 = before the journal).
_KILL_ENV = "MNISTCONV_TEST_KILL_AT"
_steps = [0]


def step() -> None:
    """A point where a commit may be cut: with MNISTCONV_TEST_KILL_AT=N in the
    environment, the Nth such point of this process SIGKILLs it (tests kill at every
    step; nothing else reads the variable)."""
    at = os.environ.get(_KILL_ENV)
    if not at:
        return
    _steps[0] += 1
    if str(_steps[0]) == at.strip():
        os.kill(os.getpid(), signal.SIGKILL)


def entry_id(path: str) -> Optional[list]:
    """[st_dev, st_ino] of path itself (a link not followed), None if it is not there."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return [st.st_dev, st.st_ino]


def _is_tree(path) -> bool:
    return os.path.isdir(path) and not os.path.islink(path)


def _remove(path) -> None:
    if _is_tree(path):
        shutil.rmtree(path, ignore_errors=True)
    elif os.path.lexists(path):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


_RENAME_EXCHANGE = 2
_renameat2 = []  # the libc function, or None where there is none


def _exchange(a: str, b: str) -> bool:
    """Swap the entries a and b in one step (Linux renameat2); False where the kernel,
    libc or filesystem cannot, so the caller renames twice."""
    if not sys.platform.startswith("linux"):
        return False
    if not _renameat2:
        import ctypes
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            function = libc.renameat2
            function.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int,
                                 ctypes.c_char_p, ctypes.c_uint]
            _renameat2.append(function)
        except (AttributeError, OSError):
            _renameat2.append(None)
    if _renameat2[0] is None:
        return False
    at_cwd = -100  # AT_FDCWD
    if _renameat2[0](at_cwd, os.fsencode(a), at_cwd, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    import ctypes
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP):
        return False
    raise OSError(code, os.strerror(code), b)


def _trash(src) -> str:
    """Where the two-rename swap parks the earlier folder (a staging name: a later run
    removes it if this one dies)."""
    return src + "-old"


def _do(op) -> None:
    """Carry out one step, or nothing if it is done or no longer meant."""
    kind = op[0]
    if kind == "remove":
        _, path, ident = op
        if entry_id(path) == ident:
            _remove(path)
    elif kind == "move":
        _, src, dst, ident = op
        if entry_id(src) == ident and entry_id(dst) != ident:
            os.replace(src, dst)
    elif kind == "swap":
        _, src, dst, ident = op
        if entry_id(dst) != ident and entry_id(src) == ident:
            if not _is_tree(dst):
                os.rename(src, dst)
            elif not _exchange(src, dst):
                if not os.path.lexists(_trash(src)):
                    os.rename(dst, _trash(src))
                step()
                os.rename(src, dst)
        step()
        if entry_id(dst) == ident:  # the earlier folder, wherever the swap left it
            _remove(src)
            _remove(_trash(src))
    else:
        raise ValueError(f"unknown commit step {kind!r}")


def _common_folder(ops) -> str:
    paths = [p for op in ops for p in op[1:-1]]
    return os.path.commonpath([os.path.dirname(p) for p in paths])


def folder_of(ops) -> Optional[str]:
    """The folder a commit's journal goes in (None: one step needs none)."""
    return _common_folder(ops) if len(ops) > 1 else None


def _write(folder, ops) -> str:
    path = os.path.join(folder, f"{JOURNAL_MARK}{os.getpid()}")
    relative = [[op[0], *(os.path.relpath(p, folder) for p in op[1:-1]), op[-1]]
                for op in ops]
    text = json.dumps({"pid": os.getpid(), "steps": relative}, ensure_ascii=True)
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o644)
    # No fsync: a killed process's writes stay with the kernel, and power loss is not
    # guarded (the staged data is not synced either), so syncing here bought nothing.
    with open(fd, "w", encoding="ascii", errors="surrogateescape") as f:
        f.write(text)
    os.rename(tmp, path)  # (a fresh name: nothing there to replace)
    return path


def run(ops: list) -> None:
    """Carry out a commit's steps: journalled first when there is more than one."""
    if not ops:
        return
    folder = folder_of(ops)
    step()
    journal = _write(folder, ops) if folder is not None else None
    for op in ops:
        step()
        _do(op)
    step()
    if journal is not None:
        os.unlink(journal)


def _read(path) -> Optional[list]:
    """The steps of a journal, absolute; None when it is not one mnistconv wrote."""
    folder = os.path.dirname(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
        with open(fd, "rb") as f:
            if not os.path.isfile(path) or os.fstat(f.fileno()).st_size > 1 << 30:
                return None
            doc = json.loads(f.read().decode("ascii"))
        steps = []
        for op in doc["steps"]:
            paths = [os.path.normpath(os.path.join(folder, p)) for p in op[1:-1]]
            if any(not p.startswith(folder + os.sep) for p in paths):
                return None  # a step outside its folder: not ours to carry out
            ident = op[-1]
            if op[0] not in ("remove", "move", "swap") or len(paths) != (
                    1 if op[0] == "remove" else 2) or not (
                    isinstance(ident, list) and len(ident) == 2
                    and all(type(n) is int for n in ident)):
                return None
            steps.append([op[0], *paths, ident])
        return steps
    except (OSError, ValueError, KeyError, TypeError, IndexError, UnicodeDecodeError):
        return None


def _alive(pid) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        pass
    return True


def dead_journals(folder: str) -> list:
    """The journals of dead runs in folder (and their half-written temporaries)."""
    try:
        names = os.listdir(folder or os.curdir)
    except OSError:
        return []
    # A folder the user reads from may hold many thousand names, and most hold no
    # journal: one search of them all in C first, then the prefix.
    if JOURNAL_MARK not in "/".join(names):
        return []
    found = []
    for name in sorted(n for n in names if n.startswith(JOURNAL_MARK)):
        m = re.fullmatch(_JOURNAL_RE, name)
        if m and not _alive(int(m.group(1))):
            found.append(os.path.join(folder, name))
    return found


@contextlib.contextmanager
def _try_lock(folder) -> Iterator[bool]:
    """The commit lock on folder if free now (False if a live run commits there)."""
    import fcntl
    try:
        fd = os.open(folder or os.curdir, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        yield True  # nothing to lock: it is gone
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


def complete(folder: str, locked: bool = False) -> bool:
    """Carry out the journals dead runs left in folder (locked: the caller holds the
    commit lock on it). True when none is left; False when a live run holds the
    folder, or a step fails (its OSError is raised)."""
    journals = dead_journals(folder)
    if not journals:
        return True
    with contextlib.nullcontext(True) if locked else _try_lock(folder) as free:
        if not free:
            return False
        for journal in dead_journals(folder):
            if journal.endswith(".tmp"):  # never the decision: the commit had not begun
                _remove(journal)
                continue
            steps = _read(journal) or []
            # Steps ran in order: those before the last one seen done are done (a path
            # may name another entry now: a file carried into a folder since swapped).
            start = max((i for i, op in enumerate(steps) if op[0] != "remove"
                         and entry_id(op[2]) == op[3]), default=0)
            for op in steps[start:]:
                _do(op)
            os.unlink(journal)
    return True


def complete_around(path: str) -> None:
    """Before reading path: dead runs' journals in it (a folder) and the folders above
    it, carried out (an OSError if one cannot be)."""
    path = os.path.abspath(str(path))
    folder = path if _is_tree(path) else os.path.dirname(path)
    for _ in range(SEARCH_UP + 1):
        complete(folder)
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent


def complete_up(folder: str) -> bool:
    """complete() in folder and the folders above it (a journal there names staged files
    here: they are the new set, not leftovers). False: a live run holds one."""
    folder = os.path.abspath(folder or os.curdir)
    for _ in range(SEARCH_UP + 1):
        if not complete(folder):
            return False
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    return True


# --- a folder replaced whole ---------------------------------------------------------

def _entries(folder) -> list:
    try:
        return sorted(os.listdir(folder))
    except OSError:
        return []


def _skipped(name) -> bool:
    """Never carried from an earlier folder: staging leftovers and commit journals."""
    return STAGING_MARK in name or name.startswith(JOURNAL_MARK)


def claimed(folder, ours, parts=()):
    """The files below folder that ours(parts) claims, never through a link."""
    for name in _entries(folder):
        path = os.path.join(folder, name)
        if _skipped(name):
            continue
        if _is_tree(path):
            yield from claimed(path, ours, parts + (name,))
        elif ours(parts + (name,)):
            yield path


def _carried(old, new, ours, skip, parts=()):
    """(old, new) renames that carry the earlier folder's files that are not ours (nor
    in skip, nor replaced by the new folder) into the new one; a folder holding none of
    ours goes in one rename."""
    moves = []
    for name in _entries(old):
        o, n, p = os.path.join(old, name), os.path.join(new, name), parts + (name,)
        if _skipped(name) or o in skip:
            continue
        if _is_tree(o):
            if _is_tree(n):
                moves += _carried(o, n, ours, skip, p)
            elif not os.path.lexists(n):
                if next(claimed(o, ours, p), None) is None and \
                        not any(s.startswith(o + os.sep) for s in skip):
                    moves.append((o, n))
                else:
                    moves += _carried(o, n, ours, skip, p)
        elif not os.path.lexists(n) and not ours(p):
            moves.append((o, n))
    return moves


def with_swaps_last(steps: list, ours_of: dict) -> list:
    """A commit's steps with each folder replaced whole ("swap") last, so it changes in
    one step: files bound for it are put in its staged folder first, its superseded
    files go with the earlier folder, and the earlier folder's files that ours_of[folder]
    does not claim (a user's) are carried into the staged one."""
    swaps = {op[2]: op[1] for op in steps if op[0] == "swap"}
    if not swaps:
        return steps

    def inside(path):
        return next((t for t in swaps if path.startswith(t + os.sep)), None)
    ordered, skip = [], set()
    for op in steps:
        target = inside(op[-2])
        if target is None:
            ordered.append(op)
        elif op[0] == "remove":
            skip.add(op[1])  # gone with the earlier folder, never carried
        else:
            moved = swaps[target] + op[-2][len(target):]
            os.makedirs(os.path.dirname(moved), exist_ok=True)
            ordered.append([*op[:-2], moved, op[-1]])
    for target, staged in swaps.items():
        if _is_tree(target):
            for old, new in _carried(target, staged, ours_of.get(target, lambda p: False),
                                     skip):
                os.makedirs(os.path.dirname(new), exist_ok=True)
                ordered.append(["move", old, new, entry_id(old)])
    return [op for op in ordered if op[0] != "swap"] + \
        [op for op in ordered if op[0] == "swap"]
