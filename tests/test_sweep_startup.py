"""The sweep's start and end cost what Ray needs and no more (docs/bench/sweeps.md, "fixed cost"):
trial actors may start in the workers Ray has already started, Tune's usage count of the sweep's
callbacks imports no tracker library, and stopping an embedded Ray leaves none of its processes.
Each check runs in a fresh interpreter, since the first two change module state of Ray Tune.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _run(code: str) -> dict:
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_trial_actors_carry_no_runtime_env_and_tune_counts_callbacks_without_tracker_imports():
    out = _run("""
import json, sys
from ray import tune
from ray.air._internal import usage
from ray.tune.execution import class_cache
from sweeps.running.driver import StoreWriter, TrackerFeed
from sweeps.backends.ray_compat import lighter_tune

class Trainable: pass
before = class_cache._ActorClassCache().get(Trainable)._default_options.get("runtime_env")
lighter_tune((StoreWriter, TrackerFeed))
lighter_tune((StoreWriter, TrackerFeed))  # a second sweep in the same process
class Trainable2: pass
after = class_cache._ActorClassCache().get(Trainable2)._default_options.get("runtime_env")
ours = [StoreWriter("s", None, None, {}), TrackerFeed.__new__(TrackerFeed)]
counted = usage._count_callbacks(ours)
imported_for_ours = [m for m in ("mlflow", "wandb", "ray.air.integrations.mlflow") if m in sys.modules]
foreign = usage._count_callbacks([tune.Callback()])
print(json.dumps(dict(before=before, after=after, counted=counted, imported=imported_for_ours,
                      foreign=foreign, integration_after_foreign="ray.air.integrations.mlflow" in sys.modules)))
""")
    assert out["before"] == {"env_vars": {"PL_DISABLE_FORK": "1"}}  # what Tune gives by default
    assert not (out["after"] or {}).get("env_vars")  # none: the actor may take an idle worker
    assert out["counted"] == {"CustomCallback": 2}
    assert out["imported"] == []
    # a callback that is not the sweep's own goes to Tune's own count, integrations and all
    assert out["foreign"] == {"CustomCallback": 1}
    assert out["integration_after_foreign"] is True


def test_stopping_an_embedded_ray_leaves_none_of_its_processes():
    out = _run("""
import json, ray
from ray._private import worker
from sweeps.backends import cluster
assert cluster.connect(None) is True
procs = {k: [i.process for i in v] for k, v in worker._global_node.all_processes.items()}
cluster.stop(True).join()
print(json.dumps(dict(types=sorted(procs), initialized=ray.is_initialized(),
                      alive=[k for k, ps in procs.items() for p in ps if p.poll() is None])))
""")
    assert "monitor" in out["types"] and "raylet" in out["types"] and "gcs_server" in out["types"]
    assert out["alive"] == []
    assert out["initialized"] is False
