"""The recurrence-vs-attention study (Kerg et al. 2020, docs/science.md §6) from stored runs:
`relrnn` writes its report and figures (accuracy vs delay, gradient profiles, cost exponents), and
`relrnn_compare` states the comparison in words and over training.
"""
