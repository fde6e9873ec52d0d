"""The --class-names read option, declared once (light: no numpy). mnistconv.read()
applies it to whatever the format's reader returns (formats.idx.classes)."""

from ...spec import Option

CLASS_NAMES = Option("class_names", "--class-names", "a text file naming the classes, "
                     "one name per line, the name of label 0 first (default: the "
                     "names the input records, if any)", "path")
