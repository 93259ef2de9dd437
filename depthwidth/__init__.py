"""depthwidth: a depth-width expressivity simulator for self-attention networks.

At what depth does stacking self-attention layers stop paying for a given width?
Levine et al. 2020 predict L_th = log_3(d_x); this package trains and analyses the networks
that test it. `depthwidth.train.train` runs one model; `sweeps` schedules grids on Ray Tune;
`analysis` fits and plots the stored results.
"""

__version__ = "0.1.0"
