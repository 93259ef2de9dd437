"""depthwidth's analysis: Kaplan-style fits, the two depth regimes, the threshold base, figures.

Follows Kaplan et al. 2020 and Levine et al. 2020 with the estimators of docs/science.md §2–4. Reads only
a results store (runs.parquet + curves.parquet) or a CSV, with numpy, scipy, pandas and matplotlib:
no torch, no ray. Entry point: `analysis.report.analyze(source, out_dir=None, bootstrap=200, seed=0)`.
"""
