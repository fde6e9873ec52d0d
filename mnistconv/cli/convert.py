"""convert and the <reader>-to-<writer> commands: read, select, write, report. Their
format options and the a-to-b commands come from the registry."""

import os
import time
from dataclasses import dataclass
from typing import Optional

import click

from ..formats import registry
from ..errors import UsageError
from ..family.identity import OPTIONS as IDENTITY
from .common import (Run, emit_json, files_json, make_progress, note, run_options, stacked,
                     follow_links_option, timeout_option)
from .inputs import (Input, StdinSpool, all_options, format_options, from_option,
                     options_for, selection, selection_options)


def _refuse_foreign(values, reader, writer, also=()):
    """An option set on the command line that neither chosen format takes (nor `also`
    names: the identity keywords a --card takes) is a mistake."""
    mine = {o.name for o in reader.read_options} | {o.name for o in writer.write_options} \
        | set(also)
    for fmt in registry.FORMATS.values():
        for o in fmt.read_options + fmt.write_options:
            if o.name not in mine and values.get(o.name) not in (None, False, o.default):
                from ..family.identity import KEYS
                raise UsageError(None, f"{o.flag} does not apply to reading {reader.name} "
                                       f"or writing {writer.name}",
                                 "drop it, or add --card (whose page states it)"
                                 if o.name in KEYS else "drop it")


def _sums_line(digest, name):
    """One line as GNU sha256sum prints it (a backslash or newline in the name escaped)."""
    if "\\" in name or "\n" in name:
        return "\\" + digest + "  " + name.replace("\\", "\\\\").replace("\n", "\\n") + "\n"
    return f"{digest}  {name}\n"


def _gone(folder, name) -> bool:
    """A listed file that is not there, or that the commit under way removes."""
    from ..io.staging import will_be_removed
    path = os.path.join(folder, name)
    return not os.path.lexists(path) or will_be_removed(path)


def _kept_sums_lines(target, ours, folder):
    """(lines kept, whether any went) of the SHA256SUMS at target: lines of files that
    still exist and are not in ours (names relative to folder) are kept."""
    from ..io.fileio import open_input
    lines, stale = [], False
    if os.path.isfile(target):
        with open_input(target, None, "r", encoding="utf-8", errors="surrogateescape") as old:
            for line in old:
                name = line.rstrip("\n")[66:] if not line.startswith("\\") else None
                if name is None or (name not in ours and not _gone(folder, name)):
                    lines.append(line if line.endswith("\n") else line + "\n")
                else:
                    stale = True
    return lines, stale


def _stage_sums(target, lines):
    from ..io.fileio import StagedOutput, create_staged
    with StagedOutput(force=True) as out:
        if not lines:  # every file it listed is gone: it goes with them
            out.supersede(target)
            return
        with create_staged(out.file(target), "w", encoding="utf-8",
                           errors="surrogateescape") as f:
            f.writelines(lines)


def _write_sha256sums(files, always):
    """SHA256SUMS in the directory holding all the written files, names relative to it,
    staged like every output. Lines of other files that still exist are kept (outputs
    in one directory share it); ours replace theirs; lines of files gone (an earlier
    shard set --force replaced) are dropped. Unless `always`, it is written only when
    it held such lines, which would fail `sha256sum -c`. Returns its path or None.
    A SHA256SUMS beside files the commit removes elsewhere (an earlier set of another
    layout) loses their lines too, and goes when it lists nothing else."""
    from ..io.staging import pending_removals, staged_path
    from ..io.fileio import sha256_file
    paths = [os.path.abspath(f.path) for f in files]
    # (the set first: an ImageFolder tree has a file per image but a folder per class)
    folder = os.path.commonpath({os.path.dirname(p) for p in paths})
    target = os.path.join(folder, "SHA256SUMS")
    for other in sorted({os.path.join(os.path.dirname(p), "SHA256SUMS")
                         for p in pending_removals()} - {target}):
        kept, went = _kept_sums_lines(other, {}, os.path.dirname(other))
        if went:
            _stage_sums(other, kept)
    lines, stale = _kept_sums_lines(
        target, {os.path.relpath(p, folder) for p in paths}, folder)
    if not (always or stale):
        return None
    # (-q hashes nothing as it writes: a SHA256SUMS there must still be kept true)
    lines += [_sums_line(f.sha256 or sha256_file(staged_path(p)), os.path.relpath(p, folder))
              for p, f in zip(paths, files)]
    _stage_sums(target, lines)
    return target


def _sums_target(dst, writer):
    """Where SHA256SUMS goes for an output."""
    folder = dst if writer.output_is_directory or registry.names_a_directory(dst) \
        else os.path.dirname(os.path.abspath(dst))
    return os.path.join(folder, "SHA256SUMS")


def _sums_beside(dst, writer) -> bool:
    """A SHA256SUMS already where this output goes (which the write may make stale)."""
    return dst != "-" and "://" not in dst and os.path.isfile(_sums_target(dst, writer))


# Files listed one per line in the summary; past that, a count (--json lists all).
SHOWN_FILES = 20


@dataclass(frozen=True)
class Conversion:
    """One conversion as the command line names it: SRC, DST, the formats (None:
    detected), --force, -q and --json."""

    src: str
    dst: str
    from_name: Optional[str] = None
    to_name: Optional[str] = None
    run: Run = Run()

    def formats(self, values, path=None, card=False):
        """The input (at `path`, where stdin was spooled, or SRC) and the writer's
        format; refuses stdio they cannot take and options neither takes."""
        src, dst = self.src, self.dst
        source = Input(path or src, self.from_name, shown_as="-" if src == "-" else None)
        reader = source.format
        writer = registry.get(self.to_name) if self.to_name else registry.detect_output(dst)
        if src == "-" and not reader.stdio:
            raise UsageError("-", f"{reader.name} cannot be read from stdin", "name the input file instead")
        if dst == "-" and not writer.stdio:
            raise UsageError("-", f"{writer.name} cannot be written to stdout", "name an output file instead")
        from ..family.identity import KEYS
        _refuse_foreign(values, reader, writer, KEYS if card else ())
        return source, writer


def _write_options(writer, values):
    """The writer's options: the command line owns its process, so every core, forked."""
    options = options_for(writer.write_options, values)
    if any(o.name == "workers" for o in writer.write_options):
        options.setdefault("workers", None)
        options["processes"] = True
    return options


def run_conversion(c: Conversion, values: dict) -> int:
    """What convert and every a-to-b command do: check, read SRC with the selection,
    write DST, then report (notes on stderr, or --json on stdout). Returns 0."""
    import mnistconv
    src, dst, quiet, as_json, force = c.src, c.dst, c.run.quiet, c.run.as_json, c.run.force
    if dst == "-" and as_json:
        raise UsageError(None, "--json prints on stdout, which '-' uses for the data",
                         "write the data to a file, or drop --json")
    sums = values.pop("sha256sums", False)
    if dst == "-" and sums:
        raise UsageError(None, "--sha256sums needs an output file, not stdout",
                         "name an output file, or drop --sha256sums")
    if sums and "://" in dst:  # it writes beside the files: a remote one would be local
        raise UsageError(dst, "--sha256sums needs a local output",
                         "write to a local path, or drop --sha256sums")
    listing = values.pop("list_outputs", False)
    card, card_target = values.pop("card", False), None
    if card and not listing:
        from ..describe.card import check_card_target
        card_target = check_card_target(dst, force)
    planned = {k: values.pop(k, None) for k in PLAN_KEYS}
    # (0 is a task index: compare by identity, not equality, with False)
    planning = any(v is not None and v is not False and v != () and v != "local"
                   for v in planned.values())
    if listing:
        if planning:
            raise UsageError(None, "--list-outputs names what a plain run writes",
                             "leave out --plan, --resume and the task options")
        return _list_outputs(c, values, sums, card)
    if planning:
        if card_target:
            raise UsageError(None, "--card does not apply to planned runs",
                             "write the card with `mnistconv card DST -o FILE`")
        return _run_planned(c, values, planned, sums)
    started = time.perf_counter()
    with StdinSpool(src) as src_path:
        source, writer = c.formats(values, src_path, card=bool(card_target))
        reader = source.format
        from ..family.identity import KEYS, given
        # The card describes the dataset as the metadata does; checked before writing.
        identity_options = given({k: values.get(k) for k in KEYS})
        if sums:  # committed with the data: what would make it fail there is refused now
            from ..io.fileio import refuse_replacing_special
            target = _sums_target(dst, writer)
            if os.path.isdir(target):
                raise UsageError(target, "is a directory, where --sha256sums writes a file",
                                 "move it away, or drop --sha256sums")
            refuse_replacing_special(target)
        dataset = source.read(values, selection(values))
        chosen = _chosen_options(values, reader, writer)
        write_options = _write_options(writer, values)
        # -q without --json, --sha256sums or --card shows no hash: none is computed
        # (unless a SHA256SUMS there must be kept true to the files replaced; a card
        # lists them, hashed as written rather than read back for it).
        from contextlib import nullcontext
        from ..io.fileio import unhashed_outputs
        shown = not quiet or as_json or sums or card_target or _sums_beside(dst, writer)
        observed, card_stats = dataset, None
        if card_target:  # the card's figures are gathered as the writer reads
            from ..describe import card
            observed, card_stats = card.observe(
                dataset, card.jpeg_quality(writer.name, write_options))
        from ..io.staging import one_commit
        # The data, its SHA256SUMS and its card appear together or not at all.
        with nullcontext() if shown else unhashed_outputs(), \
                nullcontext() if "://" in dst else one_commit():
            files = mnistconv.write(observed, dst, writer.name, force=force,
                                    progress=make_progress(quiet), **write_options)
            stats = files.stats
            sums_path = _write_sha256sums(files, sums) if files and dst != "-" and \
                "://" not in dst else None
            if card_target:  # beside the output, in the same commit
                from ..io.fileio import write_text_output
                card.complete(card_stats, dataset)
                html = card.render_card(card_stats, dst, card.output_files(files), dataset,
                                        {"input": src, "input_format": reader.name,
                                         "output": dst, "output_format": writer.name,
                                         "options": chosen, "stats": stats},
                                        identity_options)
                card_file = write_text_output(card_target, html, force)
            elif force and dst != "-" and "://" not in dst:
                _drop_earlier_card(dst)
            if force and dst != "-" and "://" not in dst:
                _drop_plan_record(dst, writer)
    splits = {name: {"count": s.header.count, "shape": list(s.header.shape),
                     "dtype": s.header.dtype.name} for name, s in dataset.splits.items()}
    if sums_path and not os.path.isabs(dst):  # named as the files are: relative if DST is
        sums_path = os.path.relpath(sums_path)
    if as_json:
        emit_json({"input": {"path": src, "format": reader.name},
                   "output": {"path": dst, "format": writer.name},
                   "splits": splits, "files": files_json(files), "stats": stats,
                   "notes": dataset.notes,
                   **({"sha256sums": sums_path} if sums_path else {}),
                   **({"card": card_file.path} if card_target else {})})
        return 0
    counts = ", ".join(f"{n} {s['count']}" for n, s in splits.items())
    # A reduction the user asked for is said in the summary itself, not only its note.
    from ..model.stream import GrayscaleSplit
    made_grey = ", colour made grayscale" if any(
        isinstance(s, GrayscaleSplit) for s in dataset.splits.values()) else ""
    note(f"{reader.name} -> {writer.name}: {counts}{made_grey} in "
         f"{time.perf_counter() - started:.2f} s", quiet)
    for f in files.files[:SHOWN_FILES]:
        note(f"  {f.path}  {f.bytes:,} bytes  sha256 {f.sha256}", quiet)
    if len(files) > SHOWN_FILES:  # an ImageFolder tree: --json has every file
        rest = files.files[SHOWN_FILES:]
        note(f"  ... and {len(rest):,} more files, {sum(f.bytes for f in rest):,} bytes "
             "(--json lists every file)", quiet)
    for key, value in stats.items():
        note(f"  {key}: {value}", quiet)
    for text in dataset.notes + _unrecorded_split_name(dataset, dst, writer):
        note(f"  note: {text}", quiet)
    if sums_path:
        note(f"  {sums_path}  (sha256sum -c)", quiet)
    if card_target:
        note(f"  card: {card_file.path}  {card_file.bytes:,} bytes", quiet)
    return 0


def _chosen_options(values, reader, writer):
    """The options this conversion was given (not their defaults), for its card."""
    declared = {o.name: o for o in list(reader.read_options) + list(writer.write_options)}
    chosen = {k: v for k, v in values.items() if k in declared and k != "workers"
              and v not in (None, False, (), declared[k].default)}
    # (an empty list is no choice: `splits=` with nothing after it said nothing)
    chosen.update((k, v) for k, v in selection(values).items()
                  if v not in (None, False, (), [], "auto"))
    return chosen


def _drop_earlier_card(dst):
    """--force without --card: the earlier output's card goes with its data."""
    from ..describe.card import card_path
    from ..io.staging import StagedOutput
    target = card_path(dst)
    if os.path.isfile(target) and not os.path.islink(target):
        with StagedOutput(force=True) as out:
            out.supersede(target)


def _list_outputs(c, values, sums, card):
    """--list-outputs: the files a plain run would write, as the user names them, named
    from the headers (outputs_of); nothing is written."""
    src, dst = c.src, c.dst
    if src == "-" or dst == "-" or "://" in dst:
        raise UsageError(dst if dst != "-" else "-", "--list-outputs needs local files",
                         "give a file or directory for SRC and DST")
    source, writer = c.formats(values)
    dataset = source.read(values, selection(values))
    options = options_for(writer.write_options, values)
    options.pop("workers", None)
    names = outputs_of(dataset, dst, writer, options)
    if sums:
        names.append(_sums_target(dst, writer))
    if card:
        from ..describe.card import card_path
        names.append(card_path(dst))
    # As the user named the output: relative to the working directory when DST was.
    shown = [n if os.path.isabs(dst) else os.path.relpath(os.path.abspath(n)) for n in names]
    if c.run.as_json:
        emit_json(shown)
    else:
        for name in shown:
            click.echo(name)
    return 0


def outputs_of(dataset, dst, writer, options) -> list:
    """The files write() makes, named without reading an image (the format's job says
    them: ShardedWrite.outputs()), then the description (croissant.json)."""
    from .. import describe
    from ..formats import contract
    dst, values = contract.checked_options(writer, dst, options)  # as write() names it
    contract.admit(writer, dataset, values)
    job = contract.writer_module(writer).prepare_write(dataset, dst, writer.options(values))
    return job.outputs() + describe.targets(writer, dst)


def _drop_plan_record(dst, writer):
    """The progress record of the earlier planned run --force replaced (shards gone),
    in the same commit: inside a folder output (and one an earlier version left beside
    it), beside a file output."""
    from ..runners.plan import is_folder_output, record_path
    from ..io.staging import StagedOutput
    records = [record_path(dst)]
    if is_folder_output(writer, dst):
        records.append(record_path(dst, folder=True))
    records = [r for r in records if os.path.lexists(r) and not os.path.isdir(r)]
    if records:
        with StagedOutput(force=True) as out:
            for record in records:
                out.supersede(record)


def _unrecorded_split_name(dataset, dst, writer):
    """One split in one file of a format that does not record its name: how to get it back."""
    if len(dataset.splits) != 1 or not writer.split_names_from_file_names \
            or writer.output_is_directory or registry.names_a_directory(dst):
        return []
    name = next(iter(dataset.splits))
    return [f"{dst} does not record the split name '{name}'; read it back with "
            f"--split-name {name}"] if name != "train" else []


# --- Shard plans, resume and Beam (mnistconv.runners.plan, mnistconv.runners.beam) ---------------------

PLAN_KEYS = ("plan", "num_tasks", "task_index", "resume", "runner", "beam_options")

# What convert and every a-to-b command take after the format options.
_OUTPUT_OPTIONS = stacked(
    click.option("--sha256sums", is_flag=True,
                 help="Also write SHA256SUMS beside the output (checked with "
                      "`sha256sum -c SHA256SUMS` in its directory)."),
    click.option("--card", is_flag=True,
                 help="Also write a dataset card beside the output (DST.card.html: "
                      "samples, class histogram, mean images, pixel statistics, files, "
                      "this conversion)."),
    click.option("--list-outputs", is_flag=True,
                 help="Print the files this conversion would write, one per line "
                      "(--json: a list), and write nothing: for a Makefile's targets or "
                      "a CI cache key."),
    click.option("--plan", is_flag=True,
                 help="Print the shard plan as JSON (tasks: split, start, stop, "
                      "shard) and write nothing."),
    click.option("--num-tasks", type=int, metavar="N",
                 help="Run one slice of the plan: tasks I, I+N, I+2N, ..."),
    click.option("--task-index", type=int, metavar="I", help="The slice (0..N-1)."),
    click.option("--resume", is_flag=True,
                 help="Keep shards already written and intact (hash checked); "
                      "write the rest."),
    click.option("--runner", type=click.Choice(["local", "beam"]), default=None,
                 help="Run the plan here (default) or as an Apache Beam pipeline."),
    click.option("--beam-option", "beam_options", multiple=True, metavar="K=V",
                 help="A Beam pipeline option, e.g. runner=DirectRunner."),
    timeout_option,
    follow_links_option,
    run_options("force", "quiet", "json"),
)


def _run_planned(c, values, planned, sums):
    """--plan, a slice of tasks, --resume or --runner beam: the plan printed or run."""
    src, dst, quiet, as_json, force = c.src, c.dst, c.run.quiet, c.run.as_json, c.run.force
    from ..runners import plan as plans
    from ..formats.contract import check_sharded
    if src == "-" or dst == "-":
        raise UsageError("-", "a shard plan reads and writes files, not stdin or stdout",
                         "name files for SRC and DST")
    if sums:
        raise UsageError(None, "--sha256sums does not apply to planned runs",
                         "drop it: the progress record holds every shard's SHA-256")
    if (planned["num_tasks"] is None) != (planned["task_index"] is None):
        raise UsageError(None, "--num-tasks and --task-index go together", "pass both, or neither")
    source, writer = c.formats(values)
    check_sharded(writer)
    if planned["beam_options"] and planned["runner"] != "beam":
        raise UsageError(None, "--beam-option needs --runner beam",
                         "add --runner beam, or drop --beam-option")
    if planned["runner"] == "beam" and planned["num_tasks"] is not None:
        raise UsageError(None, "--runner beam runs every task of the plan, not a slice",
                         "leave out --num-tasks and --task-index")
    spec = plans.InputSpec(src, source.format.name,
                           options_for(source.format.read_options, values),
                           selection(values))
    options = _write_options(writer, values)
    if planned["plan"]:
        emit_json(plans.make_plan(spec.open(), dst, writer.name, options))
        return 0
    # The header a plain conversion prints, so a log says what the shard lines are of;
    # before the first of them (an error before any stays the only line).
    which = "the shard plan" if planned["num_tasks"] is None else \
        f"task {planned['task_index']} (counting from 0) of the shard plan's {planned['num_tasks']}"
    header = [f"{source.format.name} -> {writer.name}: {which}"
              f"{', resumed' if planned['resume'] else ''}"]

    def head():
        while header:
            note(header.pop(), quiet or as_json)
    if planned["runner"] == "beam":
        from ..runners import beam
        result = beam.run(spec, dst, writer.name, options, planned["beam_options"],
                          resume=planned["resume"], force=force)
    else:
        def shown(status, task, f):
            head()
            note(f"  {f['path']}  {f['bytes']:,} bytes  sha256 {f['sha256']}  ({status})",
                 quiet or as_json)
        result = plans.run(spec, dst, writer.name, options, plans.Tasks(
            planned["num_tasks"] or 1, planned["task_index"] or 0, planned["resume"],
            force), on_task=shown)
    if as_json:
        emit_json(result)
        return 0
    head()
    if result["finished"]:
        for f in result["metadata"]:
            note(f"  {f['path']}  {f['bytes']:,} bytes  sha256 {f['sha256']}", quiet)
        for path in result["rewritten"]:
            note(f"  {path}: missing or changed since the set was finished; written "
                 "again", quiet)
        # All kept: a CI retry or a job-array rerun of a finished task had nothing to do.
        kept = result["tasks"] and all(t.get("status") == "kept" for t in result["tasks"]) \
            and not result["rewritten"]
        note(f"  {'complete' if kept else 'finished'}: every shard of plan "
             f"{result['plan_hash'][:12]} {'was already' if kept else 'is'} there "
             "(hashes checked)", quiet)
        for key, value in result["stats"].items():
            note(f"  {key}: {value}", quiet)
    else:
        note(f"  plan {result['plan_hash'][:12]}: {len(result['missing'])} shards to go "
             "(the task that writes the last one finishes the set)", quiet)
    return 0


@click.command()
@click.argument("src")
@click.argument("dst")
@from_option(help="Input format (default: detected from content, then name).")
# (--to offers only what mnistconv writes: a read-only format is no choice there)
@click.option("--to", "to_name",
              type=click.Choice([n for n, f in registry.FORMATS.items() if f.can_write]),
              help="Output format (default: from DST's name; a directory is IDX).")
@selection_options
@format_options(all_options("read") + all_options("write"))
@_OUTPUT_OPTIONS
def convert(src, dst, from_name, to_name, run, **values):
    """Convert SRC to DST, any format to any format. '-' is stdin or stdout for formats
    that are a single stream.

    \b
    Examples:
      mnistconv convert data/mnist mnist.npz
      mnistconv convert mnist.npz out/ --to idx --gzip
      mnistconv convert data/mnist subset.npz --per-class 100 --split train
      cat mnist.npz | mnistconv convert - out/ --to idx
    """
    return run_conversion(Conversion(src, dst, from_name, to_name, run), values)


def pair_command(reader_name, writer_name):
    """The click command `<reader>-to-<writer> SRC DST`: convert with both formats named,
    only their options, and its own help and example."""
    reader, writer = registry.get(reader_name), registry.get(writer_name)
    example_dst = "out/" if writer.output_is_directory else \
        f"out{writer.extensions[0] if writer.extensions else ''}"
    example_src = "data/mnist" if reader.name == "idx" else \
        f"data{reader.extensions[0] if reader.extensions else ''}"

    def command(src, dst, run, **values):
        return run_conversion(Conversion(src, dst, reader_name, writer_name, run), values)
    command.__doc__ = (f"Convert {reader.description} to {writer.description}.\n\n"
                       f"\b\nExample:\n  mnistconv {reader.name}-to-{writer.name} "
                       f"{example_src} {example_dst}")
    return stacked(
        click.command(f"{reader.name}-to-{writer.name}"),
        click.argument("src"), click.argument("dst"), selection_options,
        format_options(list(reader.read_options) + list(writer.write_options)
                       + list(IDENTITY)),  # (for --card, where the writer has none)
        _OUTPUT_OPTIONS)(command)
