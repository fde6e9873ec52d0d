"""Runners of the write contract beyond one local write: shard plans, task slices, --resume
and Beam.
"""
