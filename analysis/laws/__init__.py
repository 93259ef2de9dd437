"""The study's laws and estimators, each fitted on the engine of analysis.fitting: `kaplan`
(Kaplan et al. 2020 beside our runs), `levine` (Levine et al. 2020's predictions and the runs in
each regime), `chinchilla` (L(N, D), Hoffmann et al. 2022), `regimes` (the two-regime and
width-depth laws with the threshold base b), `threshold` (model-free estimators of b and the
headline claim), and what every fit is given: `tuning` (each shape at its best setting) and
`tokens` (the weighted (N, D, loss) points of the laws with a data term).
"""
