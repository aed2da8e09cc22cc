"""The wheel's packages: ``evictlab/`` and, as its data, the top-level ``data/`` and ``notebooks/``.

Everything else is in pyproject.toml. The package list lives here because pyproject's package
finder only finds folders inside ``evictlab/``; ``data/`` and ``notebooks/`` sit beside it in
the source tree (where a reader looks first) and are installed as ``evictlab/data/`` and
``evictlab/notebooks/`` (read through evictlab/resources.py). Every folder of data is listed as
a package of its own (a namespace package: no ``__init__.py``), as setuptools asks of folders
that ship files; the subfolders of ``data/`` follow it by name.
"""

from setuptools import find_namespace_packages, setup

SHIPPED = {"evictlab.data": "data", "evictlab.notebooks": "notebooks"}
CACHES = ["*__pycache__*"]
FOLDERS = [f"{package}.{inner}" for package, folder in SHIPPED.items()
           for inner in find_namespace_packages(folder, exclude=CACHES)]

setup(packages=[*find_namespace_packages(include=["evictlab*"], exclude=CACHES), *SHIPPED, *FOLDERS],
      package_dir=SHIPPED)
