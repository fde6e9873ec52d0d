"""Fetch the MNIST family from their publishers, verified by checksum: each file is
streamed to a staged name, hashed on the way, and renamed into place only when every
published digest matches. Transient failures are retried from the start (a restarted
transfer cannot splice two copies); permanent ones move on to the next mirror. EMNIST's
gzip.zip is kept, each member extracted beside it checked against the archive's CRC-32.
"""

import contextlib
import http.client
import os
import socket
import ssl
import time
import urllib.error
import urllib.request
import zipfile
import zlib
from dataclasses import dataclass
from typing import Optional, Sequence

from ..errors import BadOption, CorruptData, InTheWay, MnistconvError, NotFound, UsageError
from ..limits import TransferWindow, is_number
from ..io.inputzip import InputZip
from ..io.fileio import (STAGING_MARK, StagedOutput, create_staged, move_own,
                     open_input, own_entries, own_file_size, own_files_under, remove_scratch,
                     staging_prefix)
from ..model.records import NO_PROGRESS, Progress
from .checks import Result, check_digests, check_file, check_present, file_digests, hashers
from .sources import FAMILIES, Family, RemoteFile, Source, get_family

__all__ = ["FAMILIES", "Family", "RemoteFile", "Source", "get_family", "Result", "Network",
           "check_file", "check_present", "verify", "download"]

CHUNK = 1 << 16
DEFAULT_TIMEOUT = 60.0
DEFAULT_RETRIES = 3


@dataclass(frozen=True)
class Network:
    """How download() fetches, checked once: base_urls (instead of the source's mirrors),
    timeout (seconds without data), retries (per mirror), retry_delay (seconds, doubled)."""

    base_urls: Optional[Sequence[str]] = None
    timeout: float = DEFAULT_TIMEOUT
    retries: int = DEFAULT_RETRIES
    retry_delay: float = 1.0

    def __post_init__(self):
        if self.retries < 0:
            raise BadOption(None, "--retries must be 0 or more")
        if self.timeout <= 0:
            raise BadOption(None, "--timeout must be positive")


class _Attempt(Exception):
    """One failed attempt at one URL; transient ones are retried on the same mirror."""

    def __init__(self, reason, transient, kind="network"):
        super().__init__(reason)
        self.reason = reason
        self.transient = transient
        self.kind = kind  # network | http | checksum | truncated


def _failed(exc, timeout):
    """An OSError/HTTP failure as an _Attempt: its reason, and whether to retry."""
    if isinstance(exc, urllib.error.HTTPError):
        exc.close()
        return _Attempt(f"HTTP {exc.code} {exc.reason}", exc.code >= 500 or exc.code in (408, 429),
                        "http")
    reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
    if isinstance(reason, ssl.SSLError):
        # A certificate or TLS failure will not heal by retrying the same host.
        return _Attempt(f"TLS error ({getattr(reason, 'reason', None) or reason})", False)
    if isinstance(reason, socket.gaierror):
        return _Attempt("cannot resolve the host name (offline or no DNS?)", False)
    if isinstance(reason, ConnectionRefusedError):
        return _Attempt("connection refused", False)
    if isinstance(reason, (socket.timeout, TimeoutError)):
        return _Attempt(f"timed out: nothing received for {timeout:g} s", True)
    if isinstance(reason, http.client.IncompleteRead):
        return _Attempt(f"connection closed after {len(reason.partial)} bytes of a chunk "
                        "(truncated transfer)", True)
    if isinstance(reason, http.client.RemoteDisconnected):
        return _Attempt("the server closed the connection without a response", True)
    if isinstance(reason, (ConnectionError, http.client.HTTPException)):
        return _Attempt(f"connection failed ({reason})", True)
    if isinstance(reason, OSError):
        return _Attempt(f"network error ({reason.strerror or reason})", True)
    return _Attempt(str(reason), True)


_NET_ERRORS = (OSError, http.client.HTTPException)


def _fetch_once(url, staged, spec, timeout, progress):
    """Stream url to staged, hashing as it goes: (bytes, {alg: hex}), or an _Attempt."""
    # Hash exactly what the publisher stores, never a transfer re-encoding.
    request = urllib.request.Request(url, headers={"User-Agent": "mnistconv",
                                                   "Accept-Encoding": "identity"})
    try:
        response = urllib.request.urlopen(request, timeout=timeout)
    except _NET_ERRORS as e:
        raise _failed(e, timeout) from None
    running = hashers()
    got = 0
    with response:
        length = response.headers.get("Content-Length")
        length = int(length) if is_number(length) and len(length) < 19 else None
        most = _most_bytes(spec)
        if length is not None and most is not None and length > most or \
                length is not None and spec.size is not None and length != spec.size \
                and not spec.content_sha256:
            # Not the published file (an error page): said before the transfer.
            raise _Attempt(f"the mirror offers {length} bytes, the published file has "
                           f"{spec.size}", False, "checksum")
        progress.start(spec.name, length or spec.size or 0)
        window = TransferWindow(timeout)
        try:
            with create_staged(staged) as out:
                while True:
                    try:
                        # What one receive brings: read() would wait for CHUNK bytes,
                        # each receive within the timeout, for ever at a byte a second.
                        chunk = response.read1(CHUNK)
                    except _NET_ERRORS as e:
                        raise _failed(e, timeout) from None
                    if not chunk:
                        break
                    if not window.add(len(chunk)):
                        raise _Attempt(f"timed out: {window.stalled()}", True)
                    out.write(chunk)
                    for h in running.values():
                        h.update(chunk)
                    got += len(chunk)
                    progress.advance(len(chunk))
                    if most is not None and got > most:
                        raise _Attempt(f"the mirror sent more than the published "
                                       f"{spec.size} bytes", False, "checksum")
        finally:
            progress.finish()
    # http.client returns a short body without complaint when the peer closes early.
    if length is not None and got != length:
        raise _Attempt(f"truncated transfer: the connection closed after {got} of "
                       f"{length} bytes", True, "truncated")
    hexes = {alg: h.hexdigest() for alg, h in running.items()}
    return got, hexes, _equal_content(spec, staged, hexes, progress)


def _most_bytes(spec):
    """The most bytes a copy of spec may have: the published size, or for a file whose
    content SHA-256 is known, its content stored (gunzipped) or recompressed (gzip's
    worst case: 5 bytes a 16 KiB block, plus header and trailer)."""
    if spec.content_sha256 and spec.content_size is not None:
        return max(spec.size or 0, spec.content_size + spec.content_size // 3000 + 1024)
    return spec.size


def _equal_content(spec, staged, hexes, progress):
    """How a fetched copy matches (the published digest, or the content of a copy
    recompressed or gunzipped, as --verify-only checks), else an _Attempt."""
    mismatch = check_digests(spec, hexes)
    if not mismatch:
        return ""
    if spec.content_sha256:
        state = check_file(spec, staged, progress)
        if state.action == "verified":
            return state.check
        mismatch = state.problem
    raise _Attempt(mismatch, False, "checksum")


def _copy_once(path, staged, spec, progress):
    """Copy a local mirror's file to staged, hashing it: (bytes, {alg: hex}, check)."""
    if not os.path.lexists(path):
        raise _Attempt("no such file in the folder", False, "local")
    if not os.path.isfile(path):
        raise _Attempt("is not a regular file", False, "local")
    running, started = hashers(), False
    try:
        # Through the guard (a FIFO swapped in is refused, never read); the size is the
        # open file's.
        with open_input(path) as src, create_staged(staged) as out:
            size, most = os.fstat(src.fileno()).st_size, _most_bytes(spec)
            if most is not None and size > most:
                raise _Attempt(f"it has {size} bytes, the published file {spec.size}",
                               False, "checksum")
            progress.start(spec.name, size)
            started = True
            while block := src.read(CHUNK * 16):
                out.write(block)
                for h in running.values():
                    h.update(block)
                progress.advance(len(block))
    except MnistconvError as e:
        raise _Attempt(e.message, False, "local") from None
    except OSError as e:
        raise _Attempt(f"cannot be read ({e.strerror or e})", False, "local") from None
    finally:
        if started:
            progress.finish()
    hexes = {alg: h.hexdigest() for alg, h in running.items()}
    return size, hexes, _equal_content(spec, staged, hexes, progress)


def local_mirror(base):
    """A mirror as download() uses it: an http(s) URL as given, a file:// URL or a bare
    path as the absolute folder it names (which must exist), anything else a UsageError."""
    from urllib.parse import unquote, urlsplit
    text = str(base)
    if "://" not in text:
        folder = os.path.abspath(text)
    elif text[:7].lower() == "file://":
        parts = urlsplit(text)
        if parts.netloc not in ("", "localhost"):
            raise UsageError(text, f"a file:// URL of another host ({parts.netloc})",
                             "mount it and give the folder, or use file:///path")
        folder = unquote(parts.path) or "/"
    elif text.split("://", 1)[0].lower() in ("http", "https"):
        return text
    else:
        raise UsageError(text, "--base-url must be an http(s) URL, a file:// URL or a "
                               "folder", "give the mirror's http(s) address, or the folder "
                               "holding a copy of the files")
    if not os.path.isdir(folder):
        raise UsageError(text, "--base-url names no folder here",
                         "give the folder holding a copy of the files (or an http(s) URL)")
    return folder


def _is_local(base) -> bool:
    return "://" not in str(base)


def _hint(kinds):
    if kinds == {"checksum"}:
        return ("nothing was saved: the mirror serves different bytes from the ones "
                "published; point --base-url at a copy of the published files (or of "
                "their data recompressed), or leave it out to fetch from the publishers")
    if kinds == {"local"}:
        return ("nothing was saved; check that --base-url names the folder holding the "
                "published files, under their published names")
    if "checksum" in kinds or "truncated" in kinds:
        return "nothing was saved; try again, or raise --retries"
    if kinds <= {"network"}:
        return ("nothing was saved; check the network connection, or point --base-url "
                "(or MNISTCONV_BASE_URL) at a reachable mirror")
    return "nothing was saved; check --base-url (or MNISTCONV_BASE_URL)"


def _fetch(spec, target, mirrors, network, progress):
    """Download one file through the mirrors into target, verified. Returns Result."""
    failures = []  # (url, _Attempt)
    for base in mirrors:
        local = _is_local(base)
        url = os.path.join(base, *spec.name.split("/")) if local else \
            base.rstrip("/") + "/" + spec.name
        retries = 0 if local else network.retries
        for attempt in range(retries + 1):
            with StagedOutput(force=True) as staged_output:
                staged = staged_output.file(target)
                try:
                    size, hexes, check = _copy_once(url, staged, spec, progress) if local \
                        else _fetch_once(url, staged, spec, network.timeout, progress)
                except _Attempt as failure:
                    staged_output.abort()
                    last = failure
                else:
                    return Result(target, "copied" if local else "downloaded", size,
                                  hexes["sha256"], url, digests=hexes, check=check)
            if not last.transient:
                break
            if attempt < retries and network.retry_delay:
                time.sleep(network.retry_delay * 2 ** attempt)
        if last.transient and retries:
            last = _Attempt(f"{last.reason} ({retries + 1} attempts)", True, last.kind)
        failures.append((url, last))
    kinds = {f.kind for _, f in failures}
    if len(failures) == 1:
        url, failure = failures[0]
        raise MnistconvError(url, failure.reason, _hint(kinds))
    reasons = {f.reason for _, f in failures}
    if len(reasons) == 1:  # offline: say it once, then list where we looked
        message = (f"{reasons.pop()} for every mirror "
                   f"({', '.join(url for url, _ in failures)})")
    else:
        message = ("no mirror could provide it ("
                   + ", ".join(f"{url}: {f.reason}" for url, f in failures) + ")")
    raise MnistconvError(spec.name, message, _hint(kinds))


def _members(family, archive_path):
    """(member, relative target) for the archive members the family extracts: a
    ZipInfo, or for a .tar.gz (CIFAR's) a TarMember with the CRC-32 of its bytes."""
    if archive_path.endswith((".tar.gz", ".tgz")):
        infos = _tar_members(archive_path)
    else:
        try:
            with InputZip(archive_path) as archive:
                infos = archive.infolist()
        except zipfile.BadZipFile as e:
            raise CorruptData(archive_path, f"not a readable zip archive ({e})") from None
    out = []
    for info in infos:
        rel = None if info.is_dir() else family.extract(info.filename)
        if rel:
            if os.path.isabs(rel) or ".." in rel.split("/"):
                raise MnistconvError(archive_path, f"unsafe member name {info.filename!r}",
                                     "the archive is not the published one: check --base-url")
            out.append((info, rel))
    if not out:
        raise MnistconvError(archive_path, "the archive holds none of the expected files",
                             "check the archive, or download it again with --force")
    return out


@dataclass(frozen=True)
class TarMember:
    """A regular file of a tar archive, described as zipfile describes a member."""
    filename: str
    file_size: int
    CRC: int

    def is_dir(self) -> bool:
        """Never: only regular files are listed (links and devices are not extracted)."""
        return False


def _tar_members(archive_path):
    """The regular files of a .tar.gz, each CRC-32 computed from the archive (tar keeps
    none), so an extracted file is checked as a zip member's is."""
    import tarfile
    out = []
    try:
        with open_input(archive_path) as raw, \
                tarfile.open(fileobj=raw, mode="r:gz") as archive:
            for info in archive:
                if not info.isreg():
                    continue  # links, devices, folders: never extracted
                crc, f = 0, archive.extractfile(info)
                assert f is not None  # a regular file's
                with f:
                    while block := f.read(1 << 20):
                        crc = zlib.crc32(block, crc)
                out.append(TarMember(info.name, info.size, crc))
    except (tarfile.TarError, OSError, EOFError, zlib.error) as e:
        raise CorruptData(archive_path, f"not a readable tar.gz archive ({e})") from None
    return out


@contextlib.contextmanager
def _open_member(archive_path, info):
    """A reader of one member's bytes, zip or tar."""
    if isinstance(info, TarMember):
        import tarfile
        with open_input(archive_path) as raw, \
                tarfile.open(fileobj=raw, mode="r:gz") as archive:
            f = archive.extractfile(info.filename)
            assert f is not None
            with f:
                yield f
        return
    with InputZip(archive_path) as archive, archive.open(info) as f:
        yield f


def _check_member(info, path) -> Result:
    if not os.path.lexists(path):
        return Result(path, "missing", problem="missing")
    if not os.path.isfile(path):
        return Result(path, "invalid", problem="is not a regular file")
    crc = 0
    with open_input(path) as f:
        size = os.fstat(f.fileno()).st_size
        if size != info.file_size:
            return Result(path, "invalid", size,
                          problem=f"size {size} differs from the archive's {info.file_size}")
        while block := f.read(1 << 20):
            crc = zlib.crc32(block, crc)
    if crc != info.CRC:
        return Result(path, "invalid", size, problem=f"checksum mismatch: expected "
                      f"crc32 {info.CRC:08x} (from the archive), got {crc:08x}")
    return Result(path, "verified", size, check="crc32 matches the archive's")


def _extract(family, archive_path, directory, *, force, progress):
    results = []
    members = _members(family, archive_path)
    for info, rel in members:
        target = os.path.join(directory, *rel.split("/"))
        state = _check_member(info, target)
        if state.action == "verified" and not force:
            state.action = "present"
            results.append(state)
            continue
        if state.action == "invalid" and not force:
            raise UsageError(target, f"exists and does not match the archive "
                                     f"({state.problem})", "use --force to replace it")
        with StagedOutput(force=True) as staged_output:
            staged = staged_output.file(target)
            progress.start(f"extract {rel}", info.file_size)
            try:
                # zipfile checks each member's CRC-32 as it reaches the end; a
                # tar member's is checked against the one listed from the archive.
                crc = 0
                with _open_member(archive_path, info) as src, \
                        create_staged(staged) as out:
                    while block := src.read(1 << 20):
                        out.write(block)
                        crc = zlib.crc32(block, crc)
                        progress.advance(len(block))
                if crc != info.CRC:
                    raise CorruptData(archive_path, f"member {info.filename} changed "
                                                    "while it was extracted")
            except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as e:
                raise CorruptData(archive_path, f"member {info.filename} is "
                                                   f"corrupt ({e})") from None
            finally:
                progress.finish()
        results.append(Result(target, "extracted", info.file_size))
    return results


def verify(family: Family, directory, progress: Progress = NO_PROGRESS) -> list:
    """A Result (verified, missing or invalid) for each file of the family in directory."""
    directory = str(directory)
    if not os.path.isdir(directory):
        raise NotFound(directory, "no such directory")
    results = []
    for spec in family.files:
        results.append(check_present(spec, directory, progress))
        if family.extract and results[-1].action == "verified":
            results.extend(_check_member(info, os.path.join(directory, *rel.split("/")))
                           for info, rel in _members(family, results[-1].path))
    return results


def download(family: Family, directory, *, force=False, progress: Progress = NO_PROGRESS,
             source="original", **network) -> list:
    """Make directory hold the family's files, verified: those present and valid are
    kept (force re-fetches all), the rest fetched as `network` (Network's fields) says;
    a `source` (Family.source) of another layout is converted to IDX and checked against
    the official content. A Result per file; files done before a failure stay.

        download(get_family("mnist"), "data/mnist", retries=5, timeout=30)
    """
    net = Network(**network)
    chosen = family.source(source)
    # A folder or file:// mirror (air-gapped CI, a shared cache) is copied from.
    mirrors = tuple(local_mirror(u) for u in net.base_urls) if net.base_urls \
        else chosen.mirrors
    directory = os.path.abspath(str(directory))
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise InTheWay(directory, "exists and is not a directory")

    # Look at everything already there before touching the network, so a file that
    # would be refused stops the run before anything is downloaded.
    plan = []
    # A source of the family's own kind may hold other files (MedMNIST's sizes, CIFAR's
    # python version); the others are converted to the family's files.
    for spec in (chosen.files if chosen.kind == "files" else family.files):
        target = os.path.join(directory, spec.name)
        state = check_present(spec, directory, progress)
        if state.path != target and (state.action != "verified" or force):
            # A wrong uncompressed copy is not ours to replace: fetch the .gz beside it.
            state = Result(target, "missing")
        if state.action == "invalid" and not force:
            raise UsageError(target, f"exists and is not the published file "
                                     f"({state.problem})", "use --force to replace it")
        plan.append((spec, target, state))

    created = not os.path.isdir(directory)
    os.makedirs(directory, exist_ok=True)
    results = []
    try:
        if chosen.kind != "files":
            return _converted(chosen, plan, directory, mirrors, net, force, progress)
        for spec, target, state in plan:
            if state.action == "verified" and not force:
                state.action = "present"
                results.append(state)
            else:
                results.append(_fetch(spec, target, mirrors, net, progress))
            if family.extract:
                results.extend(_extract(family, target, directory, force=force,
                                        progress=progress))
    except BaseException:
        # A directory we made and left empty is not an output.
        if created and not any(STAGING_MARK not in os.path.basename(f)
                               for f in own_files_under(directory)):
            remove_scratch(directory)
        raise
    return results


def _converted(source, plan, directory, mirrors, network, force, progress):
    """A source of another layout, converted to IDX and checked before it is placed."""
    import mnistconv
    present = [state for _, _, state in plan if state.action == "verified"]
    if len(present) == len(plan) and not force:
        for state in present:
            state.action = "present"
        return present
    import tempfile
    # Named as staging is: a leftover of a killed run is recognised and removed.
    work = tempfile.mkdtemp(dir=directory, prefix=staging_prefix("source"))
    try:
        fetched, urls = {}, []
        for spec in source.files:
            target = os.path.join(work, *spec.name.split("/"))
            os.makedirs(os.path.dirname(target), exist_ok=True)
            urls.append(_fetch(spec, target, mirrors, network, progress).url)
            fetched[spec.name] = target
        splits = {}
        for name, path in fetched.items():
            ds = mnistconv.read(path, source.kind)
            if source.kind == "parquet":  # <config>/<split>-00000-of-00001.parquet
                split = os.path.basename(name).split("-")[0]
                ds.splits = {split: next(iter(ds.splits.values()))}
            for split in ds.splits.values():
                names = getattr(split, "class_names", None)  # the Parquet reader's
                if names and not split.header.class_names:
                    split.header = split.header.with_(class_names=tuple(names))
            splits.update(ds.splits)
        converted = os.path.join(work, "idx")
        mnistconv.write(mnistconv.Dataset("idx", splits), converted + os.sep, "idx")
        made = own_entries(converted)
        checks = {}
        for spec, target, _ in plan:
            raw = spec.name[:-3] if spec.name.endswith(".gz") else spec.name
            if raw not in made:
                raise MnistconvError(urls[0], f"the source holds no {raw}",
                                     "nothing was saved; choose another --source")
            checks[raw] = _check_content(spec, os.path.join(converted, raw), urls)
        with StagedOutput(force) as out:
            # The .gz of a file converted here would be read instead of it: it goes.
            gz = [n + ".gz" for n in checks] if force else []
            stage = out.directory(directory, made, replaces=gz)
            for name in made:
                move_own(os.path.join(converted, name), os.path.join(stage, name))
    finally:
        remove_scratch(work)
    return [Result(os.path.join(directory, name), "converted",
                   own_file_size(os.path.join(directory, name)),
                   checks.get(name, ("", ""))[0], ", ".join(urls),
                   check=checks.get(name, ("", ""))[1]) for name in made]


def _check_content(spec, path, urls):
    """(sha256, check) of a converted file, which must be the official content."""
    size, hexes = file_digests(path)
    if spec.content_sha256 is None:
        return hexes["sha256"], "no official content sha256 to check against"
    if hexes["sha256"] != spec.content_sha256:
        raise MnistconvError(", ".join(urls), f"converted to IDX, its "
                                              f"{os.path.basename(path)} has sha256 "
                                              f"{hexes['sha256']}, not the official "
                                              f"{spec.content_sha256}",
                             "nothing was saved: the source holds other data than the "
                             "published files")
    return hexes["sha256"], "content sha256 matches the official file"

