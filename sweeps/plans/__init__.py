"""What a sweep is, before anything runs: `spec` parses a spec file (its tables checked by
`errors`, `budget`, `adaptive_spec`, `halving` and `tracking`, its data paths by `datapath`),
`expand` and `where` turn its axes into trials, `branches` groups the budgets that are one run,
`trialconfig` is what one trial runs, `plan` and `packing` say what each trial costs and needs, and
`bundled` finds the ready-made specs. The floor of sweeps/: it imports no other part of it.
"""
