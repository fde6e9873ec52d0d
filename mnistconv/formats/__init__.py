"""One module per format, each holding its reader and writer (see registry.py)."""
