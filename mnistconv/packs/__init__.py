"""Asset packs: the browser pack (browser.py) and its manifest (manifest.py). Nothing is
imported here: browser imports formats.gdmnist, which reads manifests (an import loop)."""
