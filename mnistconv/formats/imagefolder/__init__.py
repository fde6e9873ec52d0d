"""ImageFolder: ROOT/<split>/<class>/<index>.png, as torchvision's ImageFolder and Keras'
image_dataset_from_directory read it (layout in format.py). This file is the format's
declaration, light enough for `--help`; the code is in format.py, imported on first
use."""

from ...spec import Format, Option
from ..common import SPLIT_NAME, lazy_attributes

SPEC = Format(
    "imagefolder", "mnistconv.formats.imagefolder.format",
    "ImageFolder tree <split>/<class>/<index>.png (torchvision, Keras)",
    read_options=(SPLIT_NAME,),
    write_options=(
        Option("image_format", "--image-format", "Image files: <index>.png (exact) or "
               "<index>.jpg (lossy)", "choice", ("png", "jpeg"), "png"),
        Option("jpeg_quality", "--jpeg-quality", "JPEG quality 1..100 (95 is OpenCV's "
               "default, the recipe's)", "int", (), 95, low=1, high=100),
        Option("workers", "--workers", "Encoding processes, 1..64 (default: one per "
               "core)", "int", low=1, high=64),
    ),
    output_is_directory=True,
)

__getattr__ = lazy_attributes(SPEC.module)
