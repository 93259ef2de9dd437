"""The results store, the contract between the sweep service and the analysis (docs/design.md,
"The results store"): a package on the bottom floor, beside depthwidth/, that imports none of
the project's other packages, nor torch nor Ray. In reading order: `files` (the store's error and
atomic writes of one local file), `layout` (the store's file names and columns), `location` (a
local path or a filesystem URI, read and written alike), `tables` (the runs and curves tables as
a compacted base plus append-only parts), `schema` (the one schema of tables) and `store` (the
sweep driver's writer and the row layout).
"""
