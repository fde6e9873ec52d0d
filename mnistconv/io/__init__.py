"""Input and output: the guarded opener, output placing and its commit journal, locations
local and remote, shard names, the memory budget, gzip.
"""
