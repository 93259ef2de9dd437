"""depthwidth's analysis: Kaplan-style fits, the two depth regimes, the threshold base, figures.

Follows Kaplan et al. 2020 and Levine et al. 2020 (docs/science.md §2–4); reads a results store or a CSV
with numpy, scipy, pandas and matplotlib only. Parts: `readers` (what is read), `fitting` (the engine,
planted data), `laws` (the laws and estimators), `reporting` (`analyze` in reporting/report.py, its pages
and figures), `power` (a plan's power), `kerg` (Kerg et al. 2020's study); `cli` holds the commands.
"""
