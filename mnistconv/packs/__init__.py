"""Asset packs: the browser pack (browser.py), built from GDMNIST1 files and their
manifest (formats.gdmnist)."""
