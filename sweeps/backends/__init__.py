"""Where a sweep runs: `cluster` connects to a Ray cluster, checks and shares out its nodes, and
sends a sweep to it as a Ray Job; `ray_compat` holds every use of a name Ray keeps private.
"""
