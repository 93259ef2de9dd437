"""What the analysis reads: `inputs` loads a results store, a runs CSV or a published file into
one checked dataset (bad input raises InputError naming the field and value), and `formats`
recognises published layouts (Gemstones, Epoch's Chinchilla extraction, the generic table) by
their columns and states the parameter count N used; `halving` says which runs of a successive
halving are its finals, the only ones fitted.
"""
