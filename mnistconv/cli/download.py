"""`mnistconv download`: fetch a published dataset (the MNIST family, CIFAR, SVHN,
MedMNIST), verified, from the publishers' mirrors or another source (--source keras,
hf, ...)."""

import os
from dataclasses import dataclass

import click

from ..family import download as dl
from ..errors import MnistconvError, UsageError
from ..model.records import Progress
from .common import bundle, emit_json, note, run_options, stderr_is_terminal


class ByteProgress(Progress):
    """One rich bar per file on stderr: bytes done and total, rate, time left."""

    def __init__(self):
        from rich.console import Console
        from rich.progress import (BarColumn, DownloadColumn, Progress as Bars, TextColumn,
                                   TimeRemainingColumn, TransferSpeedColumn)
        self.bars = Bars(TextColumn("{task.description}"), BarColumn(), DownloadColumn(),
                         TransferSpeedColumn(), TimeRemainingColumn(),
                         console=Console(stderr=True))
        self.task = None

    def start(self, description, total):
        self.bars.start()
        # total 0: the size is unknown (no Content-Length); rich then shows a pulse.
        self.task = self.bars.add_task(description, total=total or None)

    def advance(self, n):
        self.bars.advance(self.task, n)

    def finish(self):
        self.bars.stop()  # the file's finished bar stays on the terminal


def _human(n):
    if n is None:
        return "?"
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000


def _list(as_json):
    if as_json:
        emit_json([{
            "name": f.name, "title": f.title, "homepage": f.homepage,
            "mirrors": list(f.mirrors), "checksums_from": f.checksums_from,
            "note": f.note,
            "files": [{"name": s.name, "bytes": s.size, "md5": s.md5, "sha256": s.sha256}
                      for s in f.files],
            "sources": [{"name": s.name, "description": s.description,
                         "mirrors": list(s.mirrors), "kind": s.kind,
                         "checksums_from": s.checksums_from,
                         "files": [x.name for x in s.files]}
                        for s in (f.source(),) + f.sources]}
            for f in dl.FAMILIES.values()])
        return
    for f in dl.FAMILIES.values():
        sizes = [s.size for s in f.files]
        total = _human(sum(sizes)) if all(sizes) else "size not published"
        click.echo(f"{f.name:<14} {f.title}")
        click.echo(f"{'':<14} {len(f.files)} file(s), {total}; {f.homepage}")
        if f.note:
            click.echo(f"{'':<14} {f.note}")
        if f.sources:
            click.echo(f"{'':<14} sources: original, "
                       + ", ".join(f"{s.name} ({s.description})" for s in f.sources))


def _result_json(r, directory):
    given = {"sha256": r.sha256, "md5": r.digests.get("md5"), "url": r.url,
             "problem": r.problem, "check": r.check}
    return {"path": os.path.relpath(r.path, directory) if directory else r.path,
            "action": r.action, "bytes": r.bytes, **{k: v for k, v in given.items() if v}}


@dataclass(frozen=True)
class Fetch:
    """Where from and how patiently: --base-url, --source, --timeout, --retries."""

    base_url: tuple
    source: str
    timeout: float
    retries: int


@click.command("download")
@click.argument("name", required=False)
@click.argument("directory", required=False, type=click.Path(file_okay=False))
@click.option("--list", "list_", is_flag=True, help="List the datasets that can be fetched.")
@click.option("--verify-only", is_flag=True,
              help="Check the files in DIRECTORY against the published checksums "
                   "(MNIST: also by content, so recompressed or gunzipped copies pass); "
                   "download nothing.")
@bundle(
    "fetch", Fetch,
    click.option("--base-url", multiple=True, envvar="MNISTCONV_BASE_URL", metavar="URL",
                 help="Fetch from this mirror instead of the publishers': an http(s) "
                      "URL, a file:// URL or a folder holding a copy (repeat to try "
                      "several in order; env MNISTCONV_BASE_URL, space-separated). A copy "
                      "of the same data recompressed is accepted, as --verify-only "
                      "accepts it."),
    click.option("--source", default="original", show_default=True, metavar="NAME",
                 help="Where from: original (the publishers' files), keras (Keras' mirror; "
                      "MNIST's mnist.npz converted to IDX), hf (the Hugging Face Hub's "
                      "Parquet, converted to IDX; needs pyarrow). Converted files are "
                      "checked against the official files' content SHA-256 where known. "
                      "See --list."),
    click.option("--timeout", type=click.FloatRange(min=0, min_open=True),
                 default=dl.DEFAULT_TIMEOUT, show_default=True,
                 help="Seconds to wait for a connection or for the next bytes."),
    click.option("--retries", type=click.IntRange(min=0), default=dl.DEFAULT_RETRIES,
                 show_default=True,
                 help="Extra attempts per mirror after a timeout or a cut connection."))
@run_options("force", "quiet", "json")
def download(name, directory, list_, verify_only, fetch, run):
    """Download a dataset's files into DIRECTORY, verified against the checksums
    its publishers give. Files already present and valid are not fetched again.

    NAME is one of the datasets --list shows: MNIST and its family (mnist,
    fashion-mnist, kmnist, emnist), cifar10, cifar100, svhn and the MedMNIST sets.

    \b
    Examples:
      mnistconv download mnist data/
      mnistconv idx-to-npz data/ mnist.npz
      mnistconv download fashion-mnist fashion/ --verify-only
      mnistconv download mnist data/ --base-url https://mirror.example.org/mnist/
      mnistconv download mnist data/ --base-url /mnt/cache/mnist
      mnistconv download fashion-mnist fashion/ --source hf
      mnistconv download --list
    """
    base_url, source, force, quiet, as_json = fetch.base_url, fetch.source, run.force, \
        run.quiet, run.as_json
    if list_:
        _list(as_json)
        return 0
    if not name or not directory:
        raise UsageError(None, "expected NAME and DIRECTORY",
                         "for example: mnistconv download mnist data/ (or --list)")
    family = dl.get_family(name)
    family.source(source)  # an unknown source is a usage error before anything else
    progress = Progress() if quiet or not stderr_is_terminal() else ByteProgress()

    if verify_only:
        results = dl.verify(family, directory, progress)
        bad = [r for r in results if r.action != "verified"]
        if as_json:
            emit_json({"dataset": family.name, "directory": directory,
                       "ok": not bad, "files": [_result_json(r, directory) for r in results]})
        for r in results:
            # Say which digest matched: the published archive's, or the content's of a
            # copy recompressed or gunzipped since.
            detail = r.check if r.action == "verified" else \
                r.problem if r.problem != "missing" else ""
            note(f"{'ok' if r.action == 'verified' else r.action:<8} "
                 f"{os.path.relpath(r.path, directory)}{': ' + detail if detail else ''}",
                 quiet)
        if bad:
            more = (f" (and {len(bad) - 1} more file(s) missing or not valid)"
                    if len(bad) > 1 else "")
            raise MnistconvError(bad[0].path, bad[0].problem + more,
                                 f"run: mnistconv download {family.name} {directory}"
                                 + (" --force" if any(r.action == "invalid" for r in bad)
                                    else ""))
        note(f"All {len(results)} files of {family.name} in {directory} are valid.", quiet)
        return 0

    try:
        results = dl.download(family, directory, base_urls=base_url or None,
                              timeout=fetch.timeout, retries=fetch.retries, force=force,
                              progress=progress, source=source)
    except MnistconvError as e:
        others = [s.name for s in family.sources if s.name != source]
        if source == "original" and others and not base_url and e.exit_code == 1 \
                and "network" in (e.hint or "") + e.message:
            # Mirrors disappear: say where else the same data is.
            e.hint = f"{e.hint}; or try --source {' or --source '.join(others)}"
        raise
    if as_json:
        emit_json({"dataset": family.name, "directory": directory,
                   "files": [_result_json(r, os.path.abspath(directory)) for r in results]})
    for r in results:
        where = (f" from {r.url}" if r.url else "") + (f": {r.check}" if r.check else "")
        note(f"{r.action:<10} {os.path.relpath(r.path, os.path.abspath(directory))} "
             f"({_human(r.bytes)}){where}", quiet)
    if family.extract is None:
        note(f"Next: mnistconv idx-to-npz {directory} {family.name}.npz", quiet)
    else:
        note(f"Next: mnistconv idx-to-npz {os.path.join(directory, 'balanced')} "
             f"{family.name}-balanced.npz (one directory per split)", quiet)
    return 0
