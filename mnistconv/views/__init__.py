"""Looking at a dataset: image grids, comparing two datasets, a local viewer.
"""
