"""Tables built on the decisions: sweeps, protocol diffs, the policy zoo, robustness, validation,
the live QA comparison (``qa/``) and memory over time (``traces/``). Nothing here draws.
"""
