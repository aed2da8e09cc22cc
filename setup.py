"""The wheel's packages: ``evictlab/`` and, as its data, the top-level ``data/`` and ``notebooks/``.

Everything else is in pyproject.toml. The package list lives here because pyproject's package
finder only finds folders inside ``evictlab/``; ``data/`` and ``notebooks/`` sit beside it in
the source tree (where a reader looks first) and are installed as ``evictlab/data/`` and
``evictlab/notebooks/`` (read through evictlab/resources.py).
"""

from setuptools import find_packages, setup

SHIPPED = {"evictlab.data": "data", "evictlab.notebooks": "notebooks"}

setup(packages=[*find_packages(include=["evictlab*"]), *SHIPPED], package_dir=SHIPPED)
