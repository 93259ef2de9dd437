"""Power of a sweep plan before it runs (`depthwidth design`, docs/design-power.md): `design`
plants losses on the plan's trials and puts each replicate through the report's own estimators,
to say how often the plan would locate the threshold base b.
"""
