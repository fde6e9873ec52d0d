"""Asset packs built from a dataset: the browser pack (browser.py) and its manifest
(manifest.py). Nothing is imported here: formats.gdmnist reads manifests through
packs.manifest and packs.browser imports formats.gdmnist, so importing browser here
would make an import loop.
"""
