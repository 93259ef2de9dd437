"""Running a sweep: `service` drives it through Ray Tune, `driver` holds Tune's callbacks, each
trial runs `trainable` (`distributed` for several workers, `planted` a stand-in with a known law),
`resume` and `carry` pick up stored work, `progress` shows how it goes and `outcome` says how it
ended.
"""
