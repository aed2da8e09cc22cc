"""The live QA comparison: answer prompts, providers, grading and paired statistics.

Each module covers one step of spec sections 3 to 5 and is imported by name
(``from evictlab.analysis.qa import grading``); this package deliberately imports nothing itself, so
that using one step never loads the others.
"""
