"""The fitting engine every law of the study is fitted with, and the planted data that checks it:
`fitcore` (sums of power terms in log space, Huber loss, multi-start L-BFGS-B, batched bootstrap;
docs/science.md §3), `powerlaw` (Kaplan-style laws as frozen fit results), `identify` (whether a
parameter is identified: bounds, intervals, the profile of b), `synthetic` (sweeps with planted
laws) and `_blas` (single-threaded BLAS for the many tiny fits).
"""
