"""Inputs to cases: the protocol files, the dataset (or the embedded demo), run specs and the 45 pools.

Nothing here knows about figures or analyses; policies sit below (their parameters are part of
the protocol files).
"""
