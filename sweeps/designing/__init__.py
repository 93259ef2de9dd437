"""Designing a sweep: `design` (`depthwidth design`) rates a plan, `design_plan` costs it and
`design_search` proposes one; `adaptive` is the searcher's policy and `adaptive_search` drives it
inside Ray Tune.
"""
