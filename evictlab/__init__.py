"""evictlab: a workbench for deciding what an agent's long-term memory should forget."""

__version__ = "0.1.0"
