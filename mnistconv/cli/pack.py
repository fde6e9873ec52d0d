"""pack browser, verify and serve: browser packs of GDMNIST1 files and their manifest
(the library side is mnistconv/packs/ and mnistconv/views/serve.py)."""

import click

from ..packs import browser as packlib
from ..views.serve import make_server
from .common import emit_json, files_json, follow_links_option, make_progress, note, run_options


def _split_list(ctx, param, value):
    names = [s.strip() for s in value.split(",") if s.strip()]
    unknown = [s for s in names if s not in packlib.ALL_SPLITS]
    if unknown or not names:
        raise click.BadParameter(f"unknown split {', '.join(unknown) or '(none)'}; "
                                 f"choose from {','.join(packlib.ALL_SPLITS)}")
    return tuple(names)


@click.group("pack")
def pack():
    """Build asset packs from a dataset (see `mnistconv pack browser --help`)."""


@pack.command("browser")
@click.argument("src")
@click.argument("out")
@click.option("--train-per-class", type=click.IntRange(min=1), default=packlib.TRAIN_PER_CLASS,
              show_default=True, help="Examples of each digit in train.")
@click.option("--validation-per-class", type=click.IntRange(min=1),
              default=packlib.VALIDATION_PER_CLASS, show_default=True,
              help="Examples of each digit in validation.")
@click.option("--test-per-class", type=click.IntRange(min=1), default=packlib.TEST_PER_CLASS,
              show_default=True, help="Examples of each digit in test.")
@click.option("--validation-size", type=click.IntRange(min=1),
              default=packlib.VALIDATION_SIZE, show_default=True,
              help="Size of the validation pool: the last N of the seeded permutation of "
                   "the training split.")
@click.option("--seed", type=click.IntRange(0, 2 ** 32 - 1), default=packlib.SEED,
              show_default=True, help="torch.manual_seed value of the parent split.")
@click.option("--splits", "splits", default=",".join(packlib.ALL_SPLITS), show_default=True,
              callback=_split_list, help="Comma-separated splits to build.")
@click.option("--preview-count", type=click.IntRange(min=0), default=packlib.PREVIEW_COUNT,
              show_default=True, help="Examples in preview.json.")
@click.option("--preview-split", default=None,
              help="Split whose first examples preview.json shows [default: test].")
@click.option("--asset-version", default=packlib.ASSET_VERSION, show_default=True,
              help="asset_version written in the manifest.")
@follow_links_option
@run_options("force", "quiet", "json")
def browser(src, out, run, **options):
    """Build a browser pack in OUT from SRC (the official MNIST IDX directory): a .bin
    and a deterministic .bin.gz per split, preview.json and manifest.json. With no
    options its eight .bin and .bin.gz files are those of the published browser-v1
    pack byte for byte (no PyTorch needed: its seeded torch.randperm is rebuilt with
    numpy), and manifest.json has the published values for every split and format
    field; manifest.json names mnistconv as producer, and preview.json is mnistconv's
    own layout, so those two files differ from the published ones.

    \b
    Examples:
      mnistconv pack browser data/mnist out/
      mnistconv pack browser data/mnist small/ --train-per-class 100 --splits train,test
      mnistconv verify out/manifest.json
    """
    quiet = run.quiet
    # The options are packlib.PackOptions' fields.
    result = packlib.build_browser_pack(src, out, force=run.force,
                                        progress=make_progress(quiet), **options)
    if run.as_json:
        emit_json({"out": result.out, "files": files_json(result.files)})
        return 0
    note(f"browser pack in {result.out}: "
         + ", ".join(f"{e['id']} {e['count']}" for group in ("splits", "optional_splits")
                     for e in result.manifest.get(group, {}).values()), quiet)
    for f in result.files:
        note(f"  {f.sha256}  {f.bytes:>9}  {f.path}", quiet)
    return 0


@click.command("verify")
@click.argument("manifest")
@run_options("quiet", "json")
def verify(manifest, run):
    """Check every file MANIFEST lists (a pack's manifest.json, or its directory): byte
    sizes, SHA-256 of .bin and .bin.gz, header fields, counts, class counts, the hash of
    the original indices, and that each .bin.gz holds exactly its .bin. Names each file
    and field that differs; exit code 1 if any does. A manifest naming a file outside
    its directory (absolute, '..', or a symbolic link leading out), an unsafe split id
    or a field of the wrong JSON type is refused before any file is read (exit 1).

    \b
    Example:
      mnistconv verify out/manifest.json
    """
    report = packlib.verify(manifest)
    quiet, as_json = run.quiet, run.as_json
    if as_json:
        emit_json(report.as_dict())
    else:
        for path in report.checked:
            note(f"ok  {path}", quiet)
        for problem in report.problems:
            click.echo(f"Error: {problem}", err=True)
    if report.ok:
        note(f"{report.manifest}: all {len(report.checked)} files verified", quiet)
        return 0
    if not as_json:
        click.echo(f"Error: {report.manifest}: {len(report.problems)} check(s) failed",
                   err=True)
    return 1


@click.command("serve")
@click.argument("directory", type=click.Path(exists=True, file_okay=False))
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True,
              help="Port on 127.0.0.1 (0: any free port).")
@run_options("quiet")
def serve(directory, port, run):
    """Serve DIRECTORY (a pack, or examples/browser with a pack inside) on
    http://127.0.0.1:PORT/ until interrupted. .bin.gz files are sent as they are
    (no Content-Encoding), for the page to decompress with DecompressionStream.

    Only the folder is served: regular files and folders under it (a link may point
    only inside it; FIFOs, devices and sockets are not served), only to requests for
    localhost, 127.0.0.1 or [::1] with PORT (a page using DNS rebinding is refused),
    at most 32 connections at once, each dropped after 30 s of silence.

    \b
    Example:
      mnistconv pack browser data/mnist examples/browser/pack/
      mnistconv serve examples/browser      # open http://127.0.0.1:8000/
    """
    server = make_server(directory, "127.0.0.1", port,
                         log=None if run.quiet else lambda line: note(line))
    host, bound = server.server_address[:2]
    # Always said, even under --quiet: with --port 0 it is the only way to learn the port.
    click.echo(f"Serving {directory} on http://{host}:{bound}/ (Ctrl-C to stop)", err=True)
    try:
        server.serve_forever()
    finally:
        server.server_close()
    return 0
