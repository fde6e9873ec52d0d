"""The record model: records and batches, the schema a split carries, what a format
declares it holds, and stream transforms.
"""
