# Set-up and everyday commands. Everything installs itself on a fresh machine:
#   make demo   - a virtual environment, mnistconv, and the bundled sample in every format
#   make check  - lint, type check and the in-process tests (about a minute, no TensorFlow)
#   make test   - everything the tests need (TensorFlow, Chromium), then the tests
#   make docs   - the documentation site, built strictly into site/ (make test builds it too)
#   make bench  - whole-process timings against the baselines users have today
#   make fuzz   - the long fuzzing pass

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
DEMO_OUT ?= demo-out

.PHONY: demo check test docs bench fuzz install install-check install-test install-docs system-test-deps clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

# Stamps make re-runs instant; they are redone whenever pyproject.toml changes.
# The editable install is a plain path entry (compat mode): setuptools' default import
# hook costs every Python start in the venv about 25 ms (it imports pathlib and re).
EDITABLE := --config-settings editable_mode=compat -e
# setuptools prints a 15-line banner calling the compat mode transitional on every such
# install. The mode is chosen for the 25 ms above and pyproject.toml pins setuptools
# below the version that drops it, so the banner tells a newcomer nothing to act on:
# this one warning is filtered (by its message), every other warning still shows.
QUIET_BUILD := PYTHONWARNINGS="ignore:Compat editable installs"

# The formats the demo writes (no TensorFlow, torch or `datasets`: those are clients).
DEMO_EXTRAS := tfrecord,tfds,arrayrecord,parquet,webdataset,imagefolder,caffe

$(VENV)/.installed: pyproject.toml | $(PY)
	$(QUIET_BUILD) $(PY) -m pip install -q $(EDITABLE) '.[$(DEMO_EXTRAS)]'
	touch $@

# Every format's extra and every real client the tests read the outputs back with
# (TensorFlow, TFDS, Grain, Hugging Face datasets, webdataset, torch/torchvision, lmdb,
# h5py, Apache Beam, an S3 server: moto, the medmnist package and scipy for the colour
# datasets); torch and torchvision are the builds that lie
# on this project's machines. Beam caps protobuf below 7 and Pillow below 13 for the
# whole environment; the tests pass with those versions.
# docs: the site's tools, since the tests build it (tests/test_docs_site.py).
TEST_EXTRAS := tfrecord,tensorflow,test,caffe,test-caffe,tfds,arrayrecord,grain,test-tfds,parquet,torch,test-parquet,webdataset,imagefolder,test-pytorch,beam,test-beam,remote,test-remote,test-croissant,test-tfrecord-index,test-colour,docs

$(VENV)/.installed-test: pyproject.toml | $(PY)
	$(QUIET_BUILD) $(PY) -m pip install -q $(EDITABLE) '.[$(TEST_EXTRAS)]'
	touch $(VENV)/.installed $(VENV)/.installed-docs $(VENV)/.installed-check $@

$(VENV)/.installed-docs: pyproject.toml | $(PY)
	$(QUIET_BUILD) $(PY) -m pip install -q $(EDITABLE) '.[docs]'
	touch $@

# make check: the demo's formats and the test tools, no heavy client.
$(VENV)/.installed-check: pyproject.toml | $(PY)
	$(QUIET_BUILD) $(PY) -m pip install -q $(EDITABLE) '.[$(DEMO_EXTRAS),test]'
	touch $(VENV)/.installed $@

install: $(VENV)/.installed
install-check: $(VENV)/.installed-check
install-test: $(VENV)/.installed-test
install-docs: $(VENV)/.installed-docs

# Headless Chromium for the browser test (Debian's package; test tools cannot download
# browsers here).
system-test-deps:
	@command -v chromium >/dev/null 2>&1 || { \
	  if command -v apt-get >/dev/null 2>&1; then \
	    echo "installing Debian's chromium (apt-get) for the browser tests" >&2; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else echo "install Chromium for the browser test" >&2; fi; }

# The last line is the one command a newcomer needs next: mnistconv on PATH.
demo: install
	$(PY) examples/demo.py $(DEMO_OUT)
	@echo
	@echo "mnistconv is installed in $(VENV)/bin; to run it from this shell:"
	@echo 'export PATH="$(abspath $(VENV))/bin:$$PATH"'

# --strict: a broken link, a missing page or any warning fails the build. The material
# theme's banner about its successor is not a warning about these pages.
docs: install-docs
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

# The inner loop: every test that starts no process and imports no heavy client
# (tests/marks.py finds them), on two workers.
CHECK_MARKS := not process and not client and not slow
# mypy (one thread, its cache cold in a fresh clone) runs beside the tests' two workers,
# which wait on sockets, timeouts and the disk part of the time; both must pass.
check: install-check
	$(VENV)/bin/ruff check .
	@$(VENV)/bin/mypy > $(VENV)/mypy.out 2>&1 & mypy=$$!; \
	$(PY) -m pytest -q -n 2 -m "$(CHECK_MARKS)"; tests=$$?; \
	wait $$mypy; typed=$$?; cat $(VENV)/mypy.out; \
	test $$tests -eq 0 && test $$typed -eq 0

# Two workers (pytest-xdist); loadgroup keeps a file whose fixture is costly (a docs
# build, a reference conversion) on one worker (tests/conftest.py names them).
# PYTEST_ARGS come after, e.g. "-n 0" (one process) or "-m 'not slow'".
PYTEST_ARGS ?=
test: install-test system-test-deps
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet
	$(PY) -m pytest -q -n 2 --dist loadgroup $(PYTEST_ARGS)

# Peak memory comes from GNU time (`/usr/bin/time -v`), Debian's package `time`.
bench: install-test
	@test -x /usr/bin/time || { \
	  if command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq time >/dev/null; \
	  else echo "install GNU time (/usr/bin/time) for make bench" >&2; exit 1; fi; }
	@{ command -v gcc >/dev/null 2>&1 && test -f /usr/include/jpeglib.h && test -f /usr/include/zlib.h; } || { \
	  if command -v apt-get >/dev/null 2>&1; then \
	    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gcc libjpeg62-turbo-dev zlib1g-dev >/dev/null; } \
	      || echo "could not install gcc libjpeg62-turbo-dev zlib1g-dev: bench_tfrecord skips its C reference" >&2; \
	  fi; }
	$(PY) benchmarks/run.py

fuzz: install-test
	$(PY) -m pytest -q tests/fuzz --fuzz-long

clean:
	rm -rf $(DEMO_OUT) .pytest_cache build site *.egg-info
