"""Outputs that appear whole or not at all: the one place outputs are created, replaced
and removed. Files are staged beside their targets and renamed when complete (a new
directory in one rename); nothing is replaced without force, nor a device, FIFO or
socket even with it, nor written through a link. Staging names carry the pid, so a later
run removes a killed run's leftovers and never a live run's; commits lock the folders
they change and hold back SIGINT and SIGTERM while renaming.

A commit of more than one step survives SIGKILL: before its first change it writes a
journal (`.mnistconv-journal-<pid>` in the folder all its paths share) naming every
removal and rename with the inode it expects; a later run, and any read of the output,
completes a dead run's journal before it touches or reads anything there, so the
output is the earlier set whole or the new set whole. A folder output replaced whole
is swapped in one step (renameat2 RENAME_EXCHANGE where the filesystem has it).
"""

import contextlib
import os
import re
import shutil
import signal
import stat
import sys
import tempfile
import threading
from contextvars import ContextVar
from typing import IO, Any, Iterator, Optional

from ..errors import InTheWay, UsageError

from .journal import STAGING_MARK  # noqa: F401  (defined beside the journal's mark)
# Paths naming a stream of this process, written like '-' (a rename would replace the node).
_STREAM_PATH = re.compile(r"/dev/(stdout|stderr|fd/\d+)|/proc/self/fd/\d+")


def is_stdio(path: Any) -> bool:
    """'-': stdin or stdout."""
    return str(path) == "-"


def is_stream_path(path: Any) -> bool:
    """'-', /dev/stdout, /dev/stderr, /dev/fd/N: written as a stream, not staged."""
    return is_stdio(path) or bool(_STREAM_PATH.fullmatch(str(path)))


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """SIGINT and SIGTERM that arrive during the body take effect right after it (handlers
    swapped, not masked: Python runs them in the main thread; elsewhere nothing waits)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught, previous = [], {}
    for signum in (signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(signum) is not None:  # None: a handler not set from Python
            previous[signum] = signal.signal(signum, lambda n, frame: caught.append(n))
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if caught:
            signal.raise_signal(caught[0])


def _give_usual_modes(path):
    """mkstemp/mkdtemp make owner-only entries; an output gets a new file's modes."""
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(path, (0o777 if os.path.isdir(path) else 0o666) & ~umask)
    for root, dirs, files in os.walk(path):
        for names, mode in ((dirs, 0o777), (files, 0o666)):
            for name in names:
                os.chmod(os.path.join(root, name), mode & ~umask)


def exists_error(target: str) -> UsageError:
    """An output that exists and may not be replaced, said each caller's way."""
    return UsageError(target, "already exists", "pass force=True to replace it",
                      cli_hint="use --force to overwrite it")


def check_later_file(target: str, force: bool, role: str) -> None:
    """A file an output writes after its data (a card), checked before anything is
    written; role says what goes there, for the message."""
    if os.path.lexists(target) and not force:
        raise exists_error(target)
    if os.path.isdir(target) and not os.path.islink(target):
        raise UsageError(target, "is a directory", f"{role} goes there")
    refuse_replacing_special(target)


def refuse_replacing_special(target: str) -> None:
    """A device, FIFO or socket is refused even with force (renaming over /dev/null as
    root would replace the node); a file or a symlink (replaced, not followed) is not."""
    try:
        st = os.lstat(target)
    except FileNotFoundError:
        return
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)
            or stat.S_ISDIR(st.st_mode)):
        raise UsageError(target, "exists and is not a regular file (device, FIFO or "
                                 "socket); mnistconv will not replace it, even with force",
                         "write to a file name, or to '-' for stdout")


def check_output_path(target: str, root: Optional[str]) -> None:
    """The one rule for paths inside an output tree: below root (what the user named,
    itself maybe a link), no folder on the way to target, nor target when a folder, is
    a symlink; even --force never writes through a link (a target file that is a link
    is replaced itself)."""
    if root is None:
        return
    shown = str(root)  # messages name the links under the root as the user gave it
    target, root = os.path.abspath(target), os.path.abspath(root).rstrip(os.sep)
    if not target.startswith(root + os.sep):
        return
    parts = target[len(root) + 1:].split(os.sep)
    folder = shown
    for i, part in enumerate(parts):
        folder = os.path.join(folder, part)
        try:
            st = os.lstat(folder)
        except (FileNotFoundError, NotADirectoryError):
            return
        last = i == len(parts) - 1
        if stat.S_ISLNK(st.st_mode) and (not last or os.path.isdir(folder)):
            raise UsageError(folder, "is a symlink inside the output; mnistconv never "
                                     "writes through a link, even with force",
                             "remove the link, or write to another output")


def create_staged(path: str, mode: str = "wb", **text_options: Any) -> IO:
    """Create (or truncate) and open a file in this run's staging or scratch folder
    ("wb", or "w" with text_options), never through a link (O_NOFOLLOW)."""
    return open(path, mode, **text_options,
                opener=lambda name, flags: os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666))


def output_entries(folder: str, root: Optional[str] = None) -> list:
    """The names in an existing output folder, sorted ([] when it is not there); a link
    inside the output is refused (check_output_path), never listed."""
    check_output_path(folder, root)
    try:
        return sorted(os.listdir(folder or os.curdir))
    except OSError:
        return []


def remove_scratch(path: str) -> None:
    """Remove a scratch folder or file this run made, never following a link."""
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    elif os.path.lexists(path):
        with contextlib.suppress(OSError):
            os.unlink(path)


def open_staged(path: str) -> IO[bytes]:
    """Open a file StagedOutput.file() made, to write it. Not "wb": truncating it makes
    ext4 allocate every block on close (auto_da_alloc). Never through a link: a link put
    at the staged name between its making and this open would be written through."""
    return open(path, "r+b",
                opener=lambda name, flags: os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC))


def own_file_size(path: str) -> int:
    """The size of a file this run made (a staged output, a download in progress), not
    following a link: inputs are sized through fileio.input_size."""
    return os.lstat(path).st_size


def staging_prefix(name: str = "") -> str:
    """The start of a staging name, `.<name>.mnistconv-tmp-<pid>-` (name cut to fit 255
    bytes; the pid tells a dead run's leftovers from a live run's)."""
    return f"{'.' + name[:80] if name else ''}{STAGING_MARK}{os.getpid()}-"


def is_staging_name(name: Any) -> bool:
    """A staging leftover, never data: readers skip these names."""
    return STAGING_MARK in os.path.basename(str(name))


def _pid_alive(pid) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        pass  # someone else's process (or a name we cannot judge): keep it
    return True


def remove_dead_leftovers(folder: str) -> None:
    """Remove the staging names in folder whose run is gone (SIGKILL, a crash); a live
    run's are never touched, nor any while a dead run's commit journal is unfinished."""
    from .journal import complete_up
    if not complete_up(folder):
        return
    pattern = re.compile(re.escape(STAGING_MARK) + r"(\d+)-")
    for entry in output_entries(folder):
        m = STAGING_MARK in entry and pattern.search(entry)  # most names: no regex
        if not m or _pid_alive(int(m.group(1))) or int(m.group(1)) == os.getpid():
            continue
        remove_scratch(os.path.join(folder, entry))


@contextlib.contextmanager
def _commit_lock(folders):
    """An exclusive flock on each folder a commit changes (no lock file), so concurrent
    runs commit one after another and never mix their files."""
    import fcntl
    fds = []
    try:
        for folder in sorted(set(folders)):
            try:
                fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
            except OSError:
                continue
            fds.append(fd)
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        for fd in fds:
            os.close(fd)  # closing releases the lock


class StagedOutput:
    """Collects staged files and directories; commit() moves them into place, abort()
    removes every temporary and every directory made for the output. As a context
    manager: commit on success, abort on any exception (KeyboardInterrupt included).
    Interrupted or failed, every output file is whole, old or new; killed, the commit
    journal (journal.py) makes the whole set old or new. Several files are renamed one by
    one under the commit lock with signals held back. With root (the output the user
    named), no link inside it is followed (check_output_path)."""

    def __init__(self, force: bool = False, root: Optional[str] = None):
        self.force = force
        self.root = root
        self._moves = []  # (staged path, target path, is a whole directory)
        self._removals = []  # superseded files removed on commit (see directory())
        self._temps = []  # staged paths to remove on abort
        self._made_dirs = []  # directories made for the output, removed on abort
        self._swaps = {}  # folder replaced whole (tree()) -> what of the earlier one is ours

    def _refuse_existing(self, target):
        check_output_path(target, self.root)
        if os.path.lexists(target) and not self.force:
            raise exists_error(self._as_named(target))
        refuse_replacing_special(target)

    def _as_named(self, target):
        """target (absolute) as spelt from the output the user named (out/, m.npz)."""
        named = os.path.abspath(self.root or os.sep)
        if not self.root or os.path.commonpath([named, target]) != named:
            return target
        return self.root if target == named else \
            os.path.join(self.root, os.path.relpath(target, named))

    def _make_parent(self, parent):
        """os.makedirs, remembering what it made so abort() removes it."""
        missing = []
        folder = parent
        while folder and not os.path.isdir(folder):
            missing.append(folder)
            folder = os.path.dirname(folder)
        with signals_deferred():  # no interrupt between making and remembering them
            try:
                os.makedirs(parent, exist_ok=True)
            except FileExistsError:
                raise InTheWay(parent, "exists and is not a directory") from None
            self._made_dirs += missing  # deepest first
        # A folder this output made holds no dead run's leftovers to remove, and no
        # staged file a dead run's journal names: its scan (a listing of every folder
        # up to SEARCH_UP above it) is for folders that were there before.
        if not missing and parent not in self._made_dirs:
            remove_dead_leftovers(parent)

    def file(self, target: str) -> str:
        """A temporary path beside target to write the file at ('-': spooled in the
        temporary directory, copied to stdout on commit)."""
        if is_stream_path(target):
            remove_dead_leftovers(tempfile.gettempdir())
            tmp = self._temporary(tempfile.mkstemp,
                                  prefix=staging_prefix("stdout").lstrip("."))
            self._moves.append((tmp, str(target), False))
            return tmp
        target = os.path.abspath(target)
        self._refuse_existing(target)
        if os.path.isdir(target):
            raise InTheWay(target, "is a directory, expected a file name")
        return self._beside(target, tempfile.mkstemp, False)

    def supersede(self, path: str) -> None:
        """Remove path (an earlier output the new files replace under other names, such as
        a shard set of another size) on commit; refused without force."""
        path = os.path.abspath(path)
        self._refuse_existing(path)
        self._removals.append(path)

    def _temporary(self, make, **where):
        """Create a temporary and register it for abort(), with no interrupt in between."""
        with signals_deferred():
            made = make(**where)
            if isinstance(made, tuple):  # mkstemp: (fd, path)
                os.close(made[0])
                made = made[1]
            self._temps.append(made)
        return made

    def directory(self, target: str, names: Any, replaces: Any = ()) -> str:
        """A staging directory whose files `names` become target/<name> (refused without
        force if any exists); `replaces`: other files of target superseded on commit."""
        target = os.path.abspath(target)
        check_output_path(target, self.root)
        if os.path.exists(target) and not os.path.isdir(target):
            raise InTheWay(target, "exists and is not a directory")
        for name in list(names) + list(replaces):
            self._refuse_existing(os.path.join(target, name))
        if os.path.isdir(target):
            remove_dead_leftovers(target)
            self._removals += [os.path.join(target, name) for name in replaces]
            stage = self._temporary(tempfile.mkdtemp, prefix=staging_prefix(), dir=target)
            self._moves += [(os.path.join(stage, name), os.path.join(target, name), False)
                            for name in names]
        else:
            stage = self._beside(target, tempfile.mkdtemp, True)
        return stage

    def tree(self, target: str, ours: Any) -> str:
        """A staging folder that replaces the folder target whole, in one step, on commit.
        ours(parts) says whether a file of the earlier folder (its path below target, as
        a tuple of names) is one this kind of output writes: those go with the earlier
        set; any other file (a user's) is carried into the new folder. Without force,
        refused when the earlier folder holds one of ours."""
        target = os.path.abspath(target)
        check_output_path(target, self.root)
        if os.path.lexists(target) and not _is_tree(target):
            raise InTheWay(target, "exists and is not a directory")
        if _is_tree(target):
            if not self.force:
                from .journal import claimed
                first = next(claimed(target, ours), None)
                if first is not None:
                    raise exists_error(first)
            remove_dead_leftovers(target)
        stage = self._beside(target, tempfile.mkdtemp, True)
        self._swaps[target] = ours
        return stage

    def _staged_tree(self, target):
        return next(staged for staged, t, whole in self._moves if whole and t == target)

    def _beside(self, target, make, is_directory):
        """A temporary (`make`: mkstemp or mkdtemp) in target's folder, made if missing."""
        parent = os.path.dirname(target)
        self._make_parent(parent)
        staged = self._temporary(make, dir=parent,
                                 prefix=staging_prefix(os.path.basename(target)))
        self._moves.append((staged, target, is_directory))
        return staged

    def _directory_steps(self, staged, target, made_here):
        """The steps that put a staged folder in place: one rename or swap; a folder made
        since by another run, replaced file by file (refused without force)."""
        from .journal import entry_id
        ident = entry_id(staged)
        if target in self._swaps or (_is_tree(target) and target in made_here):
            return [["swap", staged, target, ident]]
        if not _is_tree(target):
            return [["move", staged, target, ident]]
        if not self.force:
            raise exists_error(target)
        steps = []
        for name in sorted(os.listdir(staged)):
            self._refuse_existing(os.path.join(target, name))
            steps.append(["move", os.path.join(staged, name), os.path.join(target, name),
                          entry_id(os.path.join(staged, name))])
        return steps

    def _steps(self, made_here):
        """This output's commit steps (journal.py): removals, then renames."""
        from .journal import entry_id
        steps = [["remove", path, entry_id(path)] for path in self._removals
                 if os.path.lexists(path) and not os.path.isdir(path)]
        for staged, target, whole_dir in self._moves:
            if whole_dir:
                steps += self._directory_steps(staged, target, made_here)
            elif not is_stream_path(target):
                steps.append(["move", staged, target, entry_id(staged)])
        return steps

    def _placed(self):
        for tmp in self._temps:  # emptied staging directories inside existing targets
            if os.path.isdir(tmp):
                shutil.rmtree(tmp, ignore_errors=True)
        self._made_dirs = []  # they hold the output now

    def commit(self) -> None:
        """Move every staged output into place, remove what they supersede, copy a spooled
        stream output to its stream; inside one_commit(), at the end of that block."""
        pending = _PENDING.get()
        if pending is not None:
            pending.append(self)
            return
        _commit_all([self])

    def _check_moves(self):
        for staged, target, whole_dir in self._moves:
            if not whole_dir and not is_stream_path(target) and os.path.isdir(target) \
                    and not os.path.islink(target):
                raise InTheWay(target, "is a directory, expected a file name")
            if not is_stream_path(target):
                check_output_path(target, self.root)  # a link may have appeared since
                refuse_replacing_special(target)
                _give_usual_modes(staged)

    def _refuse_raced(self):
        """Without force: a target made by a concurrent run since we looked."""
        if not self.force:
            for staged, target, whole_dir in self._moves:
                if not whole_dir and not is_stream_path(target) \
                        and os.path.lexists(target):
                    raise exists_error(target)

    def _copy_streams(self):
        for staged, target, whole_dir in self._moves:
            if is_stream_path(target):
                with open(staged, "rb") as f:
                    os.unlink(staged)  # gone even if the reader of the stream is
                    if is_stdio(target):
                        _copy_to_stream(f, sys.stdout.buffer, "stdout")
                    else:
                        with open(target, "wb") as stream:
                            _copy_to_stream(f, stream, target)
        self._moves = self._temps = []

    def abort(self) -> None:
        """Remove every temporary and every directory made for the output."""
        with signals_deferred():  # a second Ctrl-C must not cut the clean-up short
            for tmp in self._temps:
                remove_scratch(tmp)
            for folder in self._made_dirs:  # deepest first; only if still empty
                try:
                    os.rmdir(folder)
                except OSError:
                    break
        self._moves = self._temps = self._made_dirs = []

    def user_path(self, path: str) -> str:
        """The output a staging path stands for, for messages."""
        path = str(path)
        for staged, target, _ in self._moves:
            if path == staged or path.startswith(staged + os.sep):
                return target + path[len(staged):]
        return path

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            try:
                self.commit()
            except BaseException:  # a failed rename, or stdout gone: no stray temporaries
                self.abort()
                raise
            return False
        targets = [target for _, target, _ in self._moves]
        if isinstance(exc, OSError):
            if exc.filename is None and targets:
                # A failed write (ENOSPC, EIO) carries no file name: name the output.
                exc.filename = targets[0]
            elif exc.filename is not None:
                exc.filename = self.user_path(exc.filename)
        self.abort()
        return False


# The StagedOutputs completed inside one_commit(), committed together at its end.
_PENDING: ContextVar = ContextVar("mnistconv_pending_commit", default=None)


@contextlib.contextmanager
def one_commit() -> Iterator[None]:
    """Every StagedOutput completed inside this block is committed at its end in one step
    (one lock, signals held back), or aborted if the block fails: an output and its
    metadata appear together or not at all. Nested blocks join the outer one.

        with one_commit():
            files = fmt.write(dataset, "out/")       # staged, not yet in place
            write_text_output("out/croissant.json", text, force=True)
    """
    if _PENDING.get() is not None:
        yield
        return
    pending: list = []
    token = _PENDING.set(pending)
    try:
        yield
        _commit_all(pending)
    except BaseException:
        for out in reversed(pending):  # a later one stages inside folders an earlier made
            out.abort()
        raise
    finally:
        _PENDING.reset(token)


def pending_removals() -> set:
    """The files the enclosing one_commit() will remove (gone, for metadata listing them)."""
    return {path for out in _PENDING.get() or () for path in out._removals}


def staged_path(path: str) -> str:
    """Where the enclosing one_commit() holds the file it will put at path (path
    itself when none)."""
    path = os.path.abspath(path)
    for out in _PENDING.get() or ():
        for staged, target, whole_dir in out._moves:
            if target == path:
                return staged
            if whole_dir and path.startswith(target + os.sep):
                return staged + path[len(target):]
    return path


def will_be_removed(path: str) -> bool:
    """Whether the enclosing one_commit() removes the file at path: superseded, or one
    of ours in a folder replaced whole that the new folder does not have."""
    path = os.path.abspath(path)
    for out in _PENDING.get() or ():
        if path in out._removals:
            return True
        for target, ours in out._swaps.items():
            if path.startswith(target + os.sep):
                parts = tuple(path[len(target) + 1:].split(os.sep))
                if os.path.lexists(os.path.join(out._staged_tree(target), *parts)):
                    return False  # replaced by the new file of that name
                return bool(ours(parts))
    return False


def _is_tree(path) -> bool:
    return os.path.isdir(path) and not os.path.islink(path)


def _commit_steps(outputs) -> list:
    """Every output's steps, a folder replaced whole last (journal.with_swaps_last)."""
    from .journal import with_swaps_last
    made_here = {d for out in outputs for d in out._made_dirs}
    steps = [op for out in outputs for op in out._steps(made_here)]
    return with_swaps_last(steps, {t: ours for out in outputs
                                   for t, ours in out._swaps.items()})


def _commit_all(outputs: list) -> None:
    from . import journal
    for out in outputs:
        out._check_moves()
    folders = [os.path.dirname(t) for out in outputs for _, t, _ in out._moves
               if not is_stream_path(t)] + \
        [os.path.dirname(p) for out in outputs for p in out._removals]
    if folders:  # where the journal goes (every step's paths lie below it)
        folders.append(os.path.commonpath(folders))
    # An interrupt now would leave a mix of old and new; another run committing the
    # same files now would mix its files with ours.
    with signals_deferred(), _commit_lock(folders):
        for out in outputs:
            out._refuse_raced()
        for folder in sorted(set(folders)):  # a dead run's commit here goes first
            journal.complete(folder, locked=True)
        journal.run(_commit_steps(outputs))
        for out in outputs:
            out._placed()
    for out in outputs:
        out._copy_streams()


def _copy_to_stream(f, stream, name):
    """Copy a spooled output to its stream; an OSError names it, except BrokenPipeError."""
    try:
        # Not shutil.copyfileobj: it ignores a partial write (raw stdout under
        # PYTHONUNBUFFERED), losing the rest without an error.
        while block := f.read(1 << 20):
            view = memoryview(block)
            while view:
                written = stream.write(view)
                if written is None:  # a non-blocking stream that is full: wait, retry
                    import select
                    select.select([], [stream], [])
                    continue
                view = view[written:]
        stream.flush()
    except BrokenPipeError:
        raise
    except OSError as e:
        if e.filename is None:
            e.filename = name
        raise
