"""Subcommands of the ``evictlab`` command line, one module per area.

Every public module here defines ``register(subparsers)``; :mod:`evictlab.cli` finds them.
"""
