"""Describing an output: the dataset card and croissant.json.
"""
