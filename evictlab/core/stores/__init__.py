"""Memory stores read at the edge: DeerMem's file store (spec 1.14) and the folders it is imported into."""
