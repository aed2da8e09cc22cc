"""Running policies on pools: the batch engine, DeerMem's compatible entry point, the audit trail,
explanations and the one tidy decisions table (:func:`evictlab.selection.decisions.decide_grid`).
"""
