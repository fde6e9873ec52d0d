"""The family of published datasets: their files and checksums, class names, licenses, the
identity proof and downloads.
"""
