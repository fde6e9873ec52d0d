"""Remote paths (`s3://`, `gs://`, `https://`, anything fsspec knows), read and written
with the same readers and writers as local files.

An input (a file, a directory, a glob, or a writer's name with the files beside it) is
copied a chunk at a time into a spool folder in TMPDIR and read there; it is refused
first when it holds more bytes than the spool has free or more than MAX_REMOTE_FILES
files, or when a listing names anything but a file inside it (listed names are data:
`../../x` never becomes a local path). Every listing and read gives up after timeout()
without progress. The spool goes with the dataset (its name carries the pid, for the
next run to remove a killed run's); messages name the remote path, not the spool.

An output is written locally, then each file uploaded with one put where the store's
put is atomic (S3, GCS, Azure), elsewhere to a temporary name moved onto the target: no
partial object under the final name. An existing output is refused without force.
"""

import atexit
import contextlib
import contextvars
import functools
import os
import re
import shutil
import tempfile
import weakref
from urllib.parse import unquote

from ..errors import FormatError, MissingDependency, MnistconvError, NotFound, UsageError, redact
from ..limits import (TransferWindow, MAX_REMOTE_DEPTH, MAX_REMOTE_FILES, MAX_REMOTE_FOLDERS,
                     is_safe_file_name, printable)
from .fileio import create_new, own_entries, remove_scratch
from .staging import (exists_error, is_staging_name, own_file_size, remove_dead_leftovers,
                      signals_deferred, staging_prefix)

CHUNK = 1 << 20
# How much of a remote file is held at once: READ bytes per ranged read (CHUNK over
# HTTP); on S3 output, one multipart part, UPLOAD_CONCURRENCY at a time.
READ = 4 << 20
PART = 8 << 20
UPLOAD_CONCURRENCY = 4
# A scheme of two letters or more: `C://` stays a Windows drive.
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]+://")
# Stores whose single put is atomic (an unfinished upload is invisible).
_ATOMIC_PUT = {"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss"}
_GLOB = re.compile(r"[*?\[]")
_SHARD = re.compile(r"-\d{5}-of-(\d{5})$")  # TensorFlow's shard suffix
DEFAULT_TIMEOUT = 60.0
_timeout = contextvars.ContextVar("mnistconv_remote_timeout", default=DEFAULT_TIMEOUT)


@contextlib.contextmanager
def timeout(seconds):
    """Inside the block, a remote input or output gives up after `seconds` without
    progress (an answer, or PROGRESS bytes) instead of DEFAULT_TIMEOUT.

        from mnistconv.io import remote
        with remote.timeout(10):
            ds = mnistconv.read("https://example.org/mnist.npz")
    """
    token = _timeout.set(float(seconds))
    try:
        yield
    finally:
        _timeout.reset(token)


def current_timeout() -> float:
    """The timeout in effect here."""
    return _timeout.get()


def is_remote(path) -> bool:
    """Whether path is a URL (`scheme://...`) that fsspec opens, not a local path."""
    return isinstance(path, str) and bool(_URL.match(path))


def _filesystem(url):
    """(fsspec filesystem, path within it) for url, or MissingDependency."""
    scheme = url.split("://", 1)[0].lower()
    try:
        import fsspec
    except ImportError:
        raise MissingDependency("fsspec", "remote", f"the remote path {scheme}://") from None
    options = {}
    if scheme in ("s3", "s3a"):  # botocore's own socket timeouts bound uploads too
        configured = fsspec.config.conf.get(scheme, {}).get("config_kwargs", {})
        seconds = _timeout.get()
        options["config_kwargs"] = {"connect_timeout": seconds, "read_timeout": seconds,
                                    **configured}
    try:
        return fsspec.core.url_to_fs(url, **options)
    except ImportError as e:
        module = getattr(e, "name", None) or \
            {"s3": "s3fs", "gs": "gcsfs", "gcs": "gcsfs", "http": "aiohttp",
             "https": "aiohttp"}.get(scheme, scheme)
        raise MissingDependency(module, "remote", f"the remote path {scheme}://") from None
    except ValueError as e:  # an unknown protocol
        raise UsageError(url, f"not a path mnistconv can open ({_one_line(e)})",
                         "use a local path or a scheme fsspec knows (s3://, gs://, "
                         "https://, memory://)") from None


def _failed(url, what, e):
    """A store's failure as one line naming the URL."""
    if isinstance(e, MnistconvError):
        return e
    if isinstance(e, TimeoutError) or "Timeout" in type(e).__name__:
        return MnistconvError(url, f"no progress for {_timeout.get():g} s",
                              "check the server and the network, or allow more time "
                              "(mnistconv.io.remote.timeout)",
                              cli_hint="check the server and the network, or allow more "
                                       "time with --timeout")
    if isinstance(e, FileNotFoundError):
        return NotFound(url, "no such file or directory")
    if isinstance(e, NotImplementedError):
        return UsageError(url, f"this store cannot be {what}",
                          "use a store that takes writes (s3://, gs://, ...)")
    return MnistconvError(url, f"{what} failed: {_one_line(e)}", "check the URL, the network and "
                          "the credentials, then run again")


def _call(fs, method, *args, seconds=None, **kwargs):
    """fs.method(*args, **kwargs), cancelled after `seconds` (default: the timeout) on an
    asynchronous store."""
    if getattr(fs, "async_impl", False) and not getattr(fs, "asynchronous", False):
        from fsspec.asyn import sync
        seconds = _timeout.get() if seconds is None else max(seconds, 0.001)
        return sync(fs.loop, getattr(fs, "_" + method), *args, timeout=seconds,
                    **kwargs)
    return getattr(fs, method)(*args, **kwargs)


def _protocols(fs):
    return set(fs.protocol if isinstance(fs.protocol, (tuple, list)) else (fs.protocol,))


def _one_line(e):
    """A foreign exception's text on one line."""
    return " ".join((str(e) or type(e).__name__).split())[:300]


def _parent(url):
    return url.rstrip("/").rsplit("/", 1)[0]


# --- input -------------------------------------------------------------------------------

class Spool:
    """A remote input copied to a local folder, removed with the last dataset or split
    read from it (or at exit) by the process that made it, never a forked worker."""

    def __init__(self, url):
        self.url = url.rstrip("/")
        remove_dead_leftovers(tempfile.gettempdir())
        with signals_deferred():  # no interrupt between making and remembering it
            self.folder = tempfile.mkdtemp(prefix=staging_prefix("remote-in")[1:])
            weakref.finalize(self, _remove, self.folder, os.getpid())
            _folders.add(self.folder)
        # The URL's last name, when safe (the format may be told by it).
        last = self.url.rsplit("/", 1)[-1]
        self.name = last if is_safe_file_name(last) else "input"
        self.local = os.path.join(self.folder, self.name)

    def local_name(self, text):
        """text with the spool's paths given back their remote names."""
        return redact(str(text).replace(self.folder, _parent(self.url)))


_folders = set()  # this process's live spool folders, for remove_spools()


def _remove(folder, pid):
    if os.getpid() == pid:
        remove_scratch(folder)
        _folders.discard(folder)


def remove_spools():
    """Remove every spool folder of this process now (before an os._exit)."""
    _detected.clear()
    for folder in list(_folders):
        _remove(folder, os.getpid())


def _sources(fs, path, url, name):
    """[(remote path, path relative to the spool, size or None)]: what to copy, each
    listed name checked (_relative)."""
    stem = path.rstrip("/")
    base = stem.rsplit("/", 1)[-1]
    parent = _parent(stem)
    try:
        if _GLOB.search(base):
            found = [(p, _call(fs, "info", p)) for p in sorted(_call(fs, "glob", stem))]
            parent = None  # a glob's matches may lie in several folders
        elif _call(fs, "isdir", stem):
            return _tree(fs, stem, name, url)
        elif _call(fs, "isfile", stem) and _SHARD.search(base):  # read with its set
            pattern = re.escape(_SHARD.sub("", base)) + r"-\d{5}-of-" + \
                _SHARD.search(base).group(1) + "$"
            found = _files_beside(fs, stem, pattern)
        elif _call(fs, "isfile", stem):
            found = [(stem, _call(fs, "info", stem))]
            if "images" in base:  # an IDX images file: its labels file beside it
                before = base.split("images", 1)[0]
                found += _files_beside(fs, stem, re.escape(before) +
                                       r"labels-idx\d+-[a-z0-9]+(\.gz|\.xz)?$")
            return [(stem, name, found[0][1].get("size"))] + _named(fs, found[1:], parent, url)
        else:  # the name a writer was given: its per-split files and shard sets
            stub = base.split(".", 1)[0]
            found = _files_beside(fs, stem, f"({re.escape(base)}|{re.escape(stub)})-")
    except FileNotFoundError:
        found = []
    if not found:
        raise NotFound(url, "no such file or directory")
    return _named(fs, found, parent, url)


def _named(fs, found, parent, url):
    """[(path, info)] from a listing as _sources gives them, each name checked."""
    named = [(p, _relative(p, parent, url, fs), info.get("size")) for p, info in found]
    return [(p, "/".join(names), size) for p, names, size in named if names]


def _files_beside(fs, stem, pattern):
    """[(path, info)] of the files in stem's folder whose names match pattern."""
    return [(info["name"], info) for info in _call(fs, "ls", _parent(stem), detail=True)
            if info.get("type") == "file" and
            re.match(pattern, info["name"].rstrip("/").rsplit("/", 1)[-1])]


def _relative(entry, folder, url, fs):
    """The names of entry's path below folder (None: a glob's match), each a safe file
    name, else a FormatError. Over HTTP names are %-encoded links; None for a link to
    a query or fragment, or to the folder itself."""
    if folder is not None:
        if not entry.startswith(folder.rstrip("/") + "/"):
            return None if entry.rstrip("/") == folder.rstrip("/") else _unsafe(url, entry)
        entry = entry[len(folder.rstrip("/")) + 1:]
        if not entry.rstrip("/"):
            return None  # the folder itself (a link to '/' on some servers)
    else:
        entry = entry.rstrip("/").rsplit("/", 1)[-1]
    if _protocols(fs) & {"http", "https"}:
        if "?" in entry or "#" in entry:
            return None
        entry = unquote(entry)
    names = entry.rstrip("/").split("/")
    if not all(is_safe_file_name(n) for n in names):
        _unsafe(url, entry)
    return names


def _unsafe(url, entry):
    raise FormatError(url, f"its listing names {printable(entry)}, which is not a file "
                           "name inside it", "mnistconv copies only the files a listing "
                           "names inside the folder; check the server")


def _tree(fs, top, name, url):
    """Every file under the folder top, as _sources gives them: MAX_REMOTE_FOLDERS folders
    at most, MAX_REMOTE_DEPTH deep, each name checked (a listing may link to itself)."""
    found, seen, pending, folders = [], set(), [(top, [name])], 0
    while pending:
        folder, parts = pending.pop()
        folders += 1
        if folders > MAX_REMOTE_FOLDERS or len(parts) > MAX_REMOTE_DEPTH:
            raise UsageError(url, f"holds more than {MAX_REMOTE_FOLDERS:,} folders or "
                                  f"folders more than {MAX_REMOTE_DEPTH} deep",
                             "name a smaller directory or a glob")
        for info in _call(fs, "ls", folder, detail=True):
            names = _relative(info["name"], folder, url, fs)
            key = "/".join(parts + (names or []))
            if names is None or key in seen:
                continue
            seen.add(key)
            if info.get("type") == "directory":
                pending.append((info["name"], parts + names))
            else:
                found.append((info["name"], key, info.get("size")))
                if len(found) > MAX_REMOTE_FILES:
                    _too_many(url, len(found))
    return sorted(found)


def _too_many(url, count):
    raise UsageError(url, f"holds {'more than ' if count > MAX_REMOTE_FILES else ''}"
                          f"{count:,} files, more than the {MAX_REMOTE_FILES:,} mnistconv "
                          "copies from one remote input", "name a smaller directory or a glob")


def _copy_in(url) -> Spool:
    """Copy url into a new Spool, a chunk at a time, after checking it fits."""
    fs, path = _filesystem(url)
    spool = Spool(url)
    try:
        sources = [s for s in _sources(fs, path, url, spool.name)
                   if not is_staging_name(s[1].rsplit("/", 1)[-1])]
        if len(sources) > MAX_REMOTE_FILES:
            _too_many(url, len(sources))
        known = sum(size or 0 for _, _, size in sources)
        free = shutil.disk_usage(spool.folder).free
        if known > free:
            _no_room(url, known, free)
        copied = 0
        for remote, relative, size in sources:
            local = os.path.join(spool.folder, *relative.split("/"))
            os.makedirs(os.path.dirname(local), exist_ok=True)
            with create_new(local) as dst:  # two entries of one name: refused
                for chunk in _chunks(fs, remote, size):
                    copied += len(chunk)
                    if copied > free:  # a server sending more than it said
                        _no_room(url, copied, free)
                    dst.write(chunk)
    except BaseException as e:
        _remove(spool.folder, os.getpid())  # not left for garbage collection to find
        if isinstance(e, Exception):
            raise _failed(url, "reading", e) from None
        raise
    if _GLOB.search(path.rstrip("/").rsplit("/", 1)[-1]):
        spool.local = spool.folder  # the matches, read as a directory of files
    return spool


def _no_room(url, size, free):
    raise UsageError(url, f"holds {size:,} bytes, more than the {free:,} free where it "
                          f"would be copied ({tempfile.gettempdir()})",
                     "set TMPDIR to a folder with room")


def _chunks(fs, remote, size):
    """remote's bytes in one pass: HTTP as a stream (many servers lack ranges), elsewhere
    ranged reads without a cache; TimeoutError when the transfer falls under
    MIN_TRANSFER_RATE over a window of the timeout (limits.TransferWindow)."""
    seconds = _timeout.get()
    window = TransferWindow(seconds)
    left = window.left

    if not getattr(fs, "async_impl", False):
        source = fs.open(remote, "rb", cache_type="none")
        read = functools.partial(source.read, READ)
    elif _protocols(fs) & {"http", "https"}:
        from fsspec.asyn import sync
        source = sync(fs.loop, fs.open_async, remote, timeout=seconds)

        def read():
            return sync(fs.loop, source.read, CHUNK, timeout=max(left(), 0.001))
    else:
        source, offset = None, [0]
        if size is None:
            size = _call(fs, "info", remote)["size"]

        def read():
            if offset[0] >= size:
                return b""
            data = _call(fs, "cat_file", remote, start=offset[0],
                         end=min(offset[0] + READ, size), seconds=left())
            offset[0] += len(data)
            return data
    try:
        while chunk := read():
            if not window.add(len(chunk)):
                raise TimeoutError(remote)
            yield chunk
    finally:
        if source is not None and getattr(fs, "async_impl", False):
            with contextlib.suppress(Exception):
                sync(fs.loop, source.close, timeout=1)
        elif source is not None:
            source.close()


_detected = {}  # url -> Spool copied for detect_input, taken by the read() that follows


atexit.register(_detected.clear)


def _renamed(e, spool):
    """An error raised on the spool, naming the remote path instead."""
    return _replaced(e, spool.folder, _parent(spool.url))


def _replaced(e, old, new):
    if isinstance(e, MnistconvError):
        e.path = e.path.replace(old, new) if e.path else e.path
        e.message = e.message.replace(old, new)
        e.args = (str(e),)
    return e


def detect_input(url, detect_local, from_flag="--from"):
    """detect_local (registry.detect_input, handed in) for a remote path, on a local copy
    the next read() uses."""
    spool = _detected.get(url) or _copy_in(url)
    _detected[url] = spool
    return _detect(spool, detect_local, from_flag)


def _detect(spool, detect_local, from_flag="--from"):
    """The format of a spooled input (a writer's name by the first file beside it)."""
    path = spool.local
    if not os.path.lexists(path):
        entries = own_entries(spool.folder)
        if not entries:  # every key had an empty part ('a//b') or a staging name
            raise NotFound(spool.url, "holds no file mnistconv can copy (a key with an "
                                      "empty part, as 'a//b', is not read)")
        path = os.path.join(spool.folder, entries[0])
    try:
        return detect_local(path, from_flag)
    except MnistconvError as e:
        raise _renamed(e, spool) from None


def read(url, read_local, detect_local, format=None, **options):
    """mnistconv.read for a remote path: read_local (mnistconv.read, handed in) on a local
    copy that lives as long as the dataset or any of its splits."""
    spool = _detected.pop(url, None) or _copy_in(url)
    try:
        format = format or _detect(spool, detect_local).name
        dataset = read_local(spool.local, format, **options)
    except MnistconvError as e:
        raise _renamed(e, spool) from None
    dataset.notes = [spool.local_name(n) for n in dataset.notes]
    dataset.paths = [spool.local_name(p) for p in dataset.paths]
    dataset._remote_spool = spool
    for split in dataset.splits.values():
        _keep_spool(split, spool)
    return dataset


def _keep_spool(split, spool):
    """The split holds the spool, and its errors name the remote path."""
    split._remote_spool = spool
    batches = split.batches

    def remote_batches(*args, **kwargs):
        try:
            yield from batches(*args, **kwargs)
        except MnistconvError as e:
            raise _renamed(e, spool) from None
    split.batches = remote_batches


# --- output ------------------------------------------------------------------------------

def write(dataset, url, write_local, format, *, force=False, progress=None, **options):
    """mnistconv.write for a remote path: write_local (mnistconv.write, handed in) into a
    local folder as `format` (a name), then each file uploaded."""
    from .written import OutputFile, WriteResult
    name = url.rstrip("/").rsplit("/", 1)[-1]
    if not is_safe_file_name(name):  # it names the local staging file too
        raise UsageError(url, "does not end in a file or folder name",
                         "name the output, e.g. s3://bucket/mnist.npz")
    fs, path = _filesystem(url)
    try:
        if not force and not url.endswith("/") and _call(fs, "isfile", path):
            raise exists_error(url)
    except Exception as e:
        raise _failed(url, "checking the output", e) from None
    remove_dead_leftovers(tempfile.gettempdir())
    stage = tempfile.mkdtemp(prefix=staging_prefix("remote-out")[1:])
    try:
        local = os.path.join(stage, name) + ("/" if url.endswith("/") else "")
        base, root = _parent(url), _parent(path)
        try:
            result = write_local(dataset, local, format, progress=progress, **options)
        except MnistconvError as e:
            raise _replaced(e, stage, base) from None
        uploads = [(f, os.path.relpath(os.path.abspath(f.path), stage).replace(os.sep, "/"))
                   for f in result]
        try:
            if not force:
                for f, relative in uploads:
                    if _call(fs, "exists", f"{root}/{relative}"):
                        raise exists_error(f"{base}/{relative}")
            for f, relative in uploads:
                _upload(fs, f.path, f"{root}/{relative}")
        except Exception as e:
            raise _failed(url, "uploading", e) from None
    finally:
        remove_scratch(stage)
    files = [OutputFile(f"{base}/{relative}", f.bytes, f.sha256) for f, relative in uploads]
    return WriteResult(files, getattr(result, "counts", {}), getattr(result, "stats", {}))


def _upload(fs, local, target):
    """One file to target, never leaving part of it under target's name."""
    if _ATOMIC_PUT & _protocols(fs):
        # On S3, PART-sized parts (grown to fit S3's 10000) a few at a time: s3fs would
        # hold 10 large parts in memory.
        parts = {"chunksize": max(PART, -(-own_file_size(local) // 10000)),
                 "max_concurrency": UPLOAD_CONCURRENCY} if "s3" in _protocols(fs) else {}
        fs.put_file(local, target, **parts)
        return
    folder, name = target.rsplit("/", 1)
    temporary = f"{folder}/{staging_prefix(name)}{os.urandom(4).hex()}"
    try:
        fs.put_file(local, temporary)
        fs.mv(temporary, target)
    except BaseException:
        with contextlib.suppress(Exception):
            if fs.exists(temporary):
                fs.rm(temporary)
        raise


# --- a store's folder, for a planned run -------------------------------------------------

_READ_ONLY = {"http", "https"}


class Store:
    """A folder of a store (`s3://bucket/sets`) that a planned run writes its shards, its
    metadata and its progress record into: each file put whole (_upload), each read and
    check bounded by the timeout, each failure one line naming the URL. A store that
    takes no writes (http, https) is refused before anything is read or written."""

    def __init__(self, url, named=None):
        scheme = url.split("://", 1)[0].lower()
        if scheme in _READ_ONLY:  # named: the output in the message (url: its folder)
            raise UsageError(named or url, f"{scheme}:// takes no writes: a planned, sliced or "
                                  "Beam run writes its shards into a store",
                             "write to s3://, gs:// or a local path")
        self.url = url.rstrip("/")
        self.fs, self.path = _filesystem(self.url)
        self.path = self.path.rstrip("/")

    def url_of(self, relative) -> str:
        """The URL of a file of this folder (relative: '/'-separated names)."""
        return f"{self.url}/{relative}"

    def _key(self, relative):
        return f"{self.path}/{relative}"

    def _guarded(self, relative, what, call):
        try:
            return call()
        except FileNotFoundError:
            return None
        except Exception as e:
            raise _failed(self.url_of(relative), what, e) from None

    def size(self, relative):
        """The file's size in bytes, None when there is none."""
        def info():
            self.fs.invalidate_cache(_parent(self._key(relative)))
            found = _call(self.fs, "info", self._key(relative))
            if found.get("type") != "file":
                raise UsageError(self.url_of(relative), "is not a file in the store",
                                 "remove it, or write to another output")
            return int(found.get("size") or 0)
        return self._guarded(relative, "checking", info)

    def exists(self, relative) -> bool:
        """Whether anything is stored under that name."""
        return bool(self._guarded(relative, "checking", lambda: _call(
            self.fs, "exists", self._key(relative))))

    def read(self, relative, limit):
        """The file's first limit + 1 bytes (None when there is none), in one ranged
        read, so a file replaced meanwhile is read whole, old or new."""
        return self._guarded(relative, "reading", lambda: _call(
            self.fs, "cat_file", self._key(relative), start=0, end=limit + 1))

    def digest(self, relative):
        """(bytes, SHA-256) of the file, read a chunk at a time; None when there is none."""
        import hashlib
        size = self.size(relative)
        if size is None:
            return None

        def hashed():
            h, n = hashlib.sha256(), 0
            for chunk in _chunks(self.fs, self._key(relative), size):
                h.update(chunk)
                n += len(chunk)
            return n, h.hexdigest()
        return self._guarded(relative, "reading", hashed)

    def put(self, local, relative):
        """Upload a local file under that name, never leaving part of it there."""
        try:
            _upload(self.fs, local, self._key(relative))
        except Exception as e:
            raise _failed(self.url_of(relative), "uploading", e) from None
