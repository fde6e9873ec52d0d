"""Asset packs built from a dataset: the browser pack (browser.py) and the manifest
that describes a pack's files (manifest.py).

Nothing is imported here: formats.gdmnist reads a pack's manifest through
packs.manifest, and packs.browser imports formats.gdmnist, so this package's face
must not pull browser in (that would make an import loop).
"""
