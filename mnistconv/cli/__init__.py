"""The mnistconv command line. Commands live in modules imported only when run, so
`mnistconv --help` and light commands never pay for heavy ones.

Exit codes: 0 success; 1 bad input data or a failed write; 2 usage (bad options, an
output that exists without --force, a missing optional dependency); 130 interrupted
(SIGINT); 143 terminated (SIGTERM). Every error is one line on stderr, no traceback.
"""

import errno
import importlib
import os
import signal
import sys

import click

from ..errors import MnistconvError

# Conversions do no linear algebra; OpenBLAS's idle threads only spin at start-up and
# exit (about 0.1 s of CPU per command, measured). Set before numpy is first imported.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

# command name -> ("module:attribute", one-line help). The help is kept here so that
# `mnistconv --help` lists every command without importing any of them.
COMMANDS = {
    "convert": ("mnistconv.cli.convert:convert", "Convert SRC to DST, any format to any format."),
    "info": ("mnistconv.cli.convert:info",
             "Format, splits, counts, labels, per-class histogram, SHA-256 of each file."),
    "formats": ("mnistconv.cli.convert:formats_command",
                "List the formats mnistconv reads and writes, with their options."),
    "show": ("mnistconv.cli.view:show", "Draw images in the terminal with label and index."),
    "preview": ("mnistconv.cli.view:preview", "Write a PNG contact sheet, one row per class."),
    "compare": ("mnistconv.cli.view:compare",
                "Compare two datasets split by split; exit 1 when they differ."),
    "download": ("mnistconv.cli.download:download",
                 "Download MNIST, Fashion-MNIST, KMNIST or EMNIST, checksums verified."),
    "pack": ("mnistconv.cli.pack:pack", "Build asset packs (pack browser: GDMNIST1 + manifest)."),
    "verify": ("mnistconv.cli.pack:verify", "Check every file a pack manifest lists."),
    "serve": ("mnistconv.cli.pack:serve", "Serve a directory on 127.0.0.1 (browser demo)."),
}


def _pair_commands():
    from .. import registry
    return {f"{r.name}-to-{w.name}": (r.name, w.name)
            for r in registry.readers() for w in registry.writers() if r.name != w.name}


class LazyGroup(click.Group):
    def list_commands(self, ctx):
        return list(COMMANDS) + sorted(_pair_commands())

    def get_command(self, ctx, name):
        if name in COMMANDS:
            module, attr = COMMANDS[name][0].split(":")
            return getattr(importlib.import_module(module), attr)
        pairs = _pair_commands()
        if name in pairs:
            from .convert import pair_command
            return pair_command(*pairs[name])
        return None

    def format_commands(self, ctx, formatter):
        with formatter.section("Commands"):
            formatter.write_dl([(name, text) for name, (_, text) in COMMANDS.items()])
        by_reader = {}
        for reader, writer in sorted(_pair_commands().values()):
            by_reader.setdefault(f"{reader}-to-", []).append(writer)
        with formatter.section("Conversions (READER-to-WRITER SRC DST, options as convert)"):
            formatter.write_dl([(f"{r}WRITER", ", ".join(ws)) for r, ws in by_reader.items()])


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="mnistconv")
def cli():
    """Convert MNIST-like image datasets between IDX, npz, TFRecord and GDMNIST1.

    \b
    Examples:
      mnistconv idx-to-npz data/mnist mnist.npz
      mnistconv convert data/mnist out.tfrecord --limit 1000
      mnistconv info data/mnist --json
    """


def _terminate(signum, frame):
    # Turn SIGTERM into an exception so staged outputs are cleaned up on the way out.
    raise SystemExit(128 + signum)


def main(argv=None):
    signal.signal(signal.SIGTERM, _terminate)
    try:
        # A command may return an int exit code (compare: 1 when the datasets differ).
        code = cli.main(args=argv, prog_name="mnistconv", standalone_mode=False)
    except MnistconvError as e:
        click.echo(f"Error: {e}", err=True)
        sys.exit(e.exit_code)
    except click.exceptions.Abort:
        click.echo("Interrupted.", err=True)
        sys.exit(130)
    except KeyboardInterrupt:
        click.echo("Interrupted.", err=True)
        sys.exit(130)
    except click.ClickException as e:
        e.show()
        sys.exit(e.exit_code)
    except BrokenPipeError:
        # The reader of our stdout went away (`| head`): not an error of ours.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
    except OSError as e:
        where = f"{e.filename}: " if e.filename else ""
        hint = "; free some space and run again" if e.errno == errno.ENOSPC else ""
        click.echo(f"Error: {where}{e.strerror or e}{hint}", err=True)
        sys.exit(1)
    sys.exit(code if isinstance(code, int) else 0)


def console():
    """The `mnistconv` program: main(), then leave with os._exit. The interpreter's
    normal exit tears down every module and object first, 0.05-0.1 s after a TFRecord
    conversion (protobuf, numpy, PIL and everything they hold), for a process that
    is ending anyway. Nothing of ours waits for exit: outputs are committed, worker
    processes reaped and temporaries removed before main() returns; only stdout and
    stderr are flushed here. (Tests and library users call main(), which exits
    normally.)"""
    from ..process import reuse_freed_memory
    reuse_freed_memory()
    try:
        main()
        code = 0
    except SystemExit as e:
        code = e.code
    if code is None:
        code = 0
    elif not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, ValueError):  # reader gone, or stream closed
            code = code or 1
    os._exit(code)
