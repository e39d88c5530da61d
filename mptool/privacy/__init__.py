"""The privacy measures: probability binning, PDTP of two probability arrays, DTP summaries, query-set DTP."""
