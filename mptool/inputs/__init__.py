"""Everything a user hands mptool: the YAML spec, the data file, estimators and pipelines, bundled data.

Imports only ``mptool.runtime``; nothing here writes results.
"""
