"""Worker pools: the parallel encoder every sharded writer plugs into, and process-wide
tuning for the processes mnistconv owns.
"""
