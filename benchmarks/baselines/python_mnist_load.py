"""python-mnist (PyPI `python-mnist`): MNIST(dir).load_training() on the uncompressed
files with their canonical names (its default; gz=True would want the .gz names).
Usage: python_mnist_load.py DIR [--gz]"""
import sys

from mnist import MNIST

data = MNIST(sys.argv[1], gz="--gz" in sys.argv[2:])
images, labels = data.load_training()
print(len(images), len(labels))
