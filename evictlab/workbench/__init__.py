"""What people look at: figures (``plots/``), the notebooks' loaders, the explorer widgets, the
report and the offline run viewer. Everything here reads tables the lower layers computed.
"""
