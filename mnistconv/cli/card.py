"""card: a dataset card, one self-contained HTML page, for anything mnistconv reads
(mnistconv.describe.card; `convert --card` writes one beside a conversion's output)."""

import click

from ..errors import UsageError
from .common import note, run_options, follow_links_option, timeout_option
from ..family.identity import KEYS, OPTIONS as IDENTITY
from .inputs import Input, all_options, format_options, from_option


@click.command()
@click.argument("path")
@click.option("-o", "--output", "output", required=True, metavar="FILE",
              help="The HTML file to write.")
@from_option()
@format_options(all_options("read") + list(IDENTITY))
@timeout_option
@follow_links_option
@run_options("force", "quiet")
def card(path, output, from_name, run, **values):
    """Write a dataset card for PATH: one HTML file, images inline, no network
    references. Per split: the count, the first images of each class, the class
    histogram, the mean image of each class, pixel statistics; then the files read,
    with sizes and SHA-256.

    \b
    It names the dataset and states its license and citation as --name, --license,
    --citation, ... say, else only when PATH's files are a published dataset's (their
    checksums match).

    \b
    Examples:
      mnistconv card data/mnist -o mnist-card.html
      mnistconv card digits/ -o card.html --name my-digits --license CC-BY-4.0
      mnistconv card mnist.tfrecord -o card.html --force
    """
    from ..describe import card as cards
    from ..io.fileio import write_text_output
    if output == "-" or output.endswith(("/", "\\")):
        raise UsageError(output, "is not a file name", "name an HTML file to write")
    from ..family.identity import given
    described = given({k: values.pop(k, None) for k in KEYS})
    dataset = Input(path, from_name).read(values)
    stats = cards.collect(dataset)
    html = cards.render_card(stats, path, cards.input_files(dataset), dataset,
                             options=described)
    written = write_text_output(output, html, run.force)
    note(f"card: {written.path}  {written.bytes:,} bytes", run.quiet)
    return 0
