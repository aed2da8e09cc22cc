"""Trace mode: memory over time.

A trace is a time-ordered stream of memory events (:mod:`.schema`); :mod:`.generate` draws
seeded workloads and derives knowledge-update traces from a dataset; :mod:`.replay` runs a
trace through every policy and capacity of a run in one pass, in DeerMem's update order, on the
lockstep memories of :mod:`.memory` (decided by the one selector); :mod:`.optimum` is the exact
offline bound; :mod:`.metrics` builds capacity curves; :mod:`.study` runs many workloads on Dask.
"""
