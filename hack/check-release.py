#!/usr/bin/env python3
"""Install what hack/release.sh built, as a user would, and check each piece. CI's release
stage runs it right after the build; run it on a release folder before publishing it.

    .venv/bin/python hack/check-release.py dist/release-0.1.0

- SHA256SUMS: every file listed, every listed file matches.
- The chart: ``helm install`` of the packaged .tgz into the testbed's own API server
  (kube-apiserver + etcd on loopback): every object is created there, and its rendering
  applied with ``kubectl apply --server-side`` as a second release; the Deployment's
  image is the registry-qualified name the release was built for; its README and Artifact Hub
  annotations are in the package.
- The wheel: into a clean virtual environment (its dependencies from the lock, with uv's
  cache); ``argus --version`` and ``argus-operator --version`` print the release.
- The kubectl plugin: ``kubectl krew install --manifest=... --archive=...`` (krew built from
  its Go module) into an empty KREW_ROOT; ``kubectl argus --version`` and ``kubectl argus
  validate`` run through kubectl; a manifest whose sha256 is wrong is refused; the launcher
  passes over a python3 it has no packages for and runs a python3.X it has, or says what it
  needs.
- The image archive: an OCI layout whose one manifest is named <repository>:<version>, its
  entrypoint argus-operator (CI's image stage ran the image itself).
- The SBOM: CycloneDX 1.6 JSON listing exactly the lock's packages and versions.
- The licence: LICENSE (Apache-2.0, the repository's) in the folder, the chart (and its
  artifacthub.io/license annotation), the wheel (License-Expression) and the sdist;
  CHANGELOG.md, whose first section is this release's (hack/changelog.py).

Prints one line per check; exits 1 with the failing check's reason.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import tomllib
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "testbed"))
from changelog import first_version  # noqa: E402  (hack/, this script's folder)

from argus_testbed import ControlPlane, find_binaries  # noqa: E402
from argus_testbed.controlplane import find_kubectl  # noqa: E402

KREW_MODULE, KREW_VERSION = "sigs.k8s.io/krew/cmd/krew", "v0.4.4"
KUBE_VERSION = "1.34.4"  # the testbed's API server; `helm template` assumes 1.20 unless told
CACHE = Path(os.environ.get("ARGUS_CACHE_DIR") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "argus")


class Failed(Exception):
    pass


def run(*argv: str | Path, env: dict[str, str] | None = None, check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([str(a) for a in argv], capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=timeout)
    if check and proc.returncode != 0:
        raise Failed(f"{' '.join(map(str, argv))} exited {proc.returncode}:\n{proc.stderr[-3000:]}{proc.stdout[-1000:]}")
    return proc


def ok(what: str) -> None:
    print(f"check-release: ok: {what}", flush=True)


def check_sums(folder: Path) -> None:
    listed = {}
    for line in (folder / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split(maxsplit=1)
        listed[name.lstrip("*")] = digest
    present = {p.name for p in folder.iterdir() if p.name != "SHA256SUMS"}
    if set(listed) != present:
        raise Failed(f"SHA256SUMS lists {sorted(listed)}, the folder holds {sorted(present)}")
    for name, digest in listed.items():
        if hashlib.sha256((folder / name).read_bytes()).hexdigest() != digest:
            raise Failed(f"{name}: sha256 differs from SHA256SUMS")
    ok(f"SHA256SUMS matches all {len(listed)} files")


def check_chart(folder: Path, version: str, work: Path) -> None:
    charts = sorted(folder.glob("argus-*.tgz"))
    if len(charts) != 1:
        raise Failed(f"expected one packaged chart argus-<version>.tgz, found {[c.name for c in charts]}")
    chart = charts[0]
    with tarfile.open(chart) as tar:
        meta = yaml.safe_load(tar.extractfile("argus/Chart.yaml").read())  # type: ignore[union-attr]
        readme = tar.extractfile("argus/README.md").read().decode()  # type: ignore[union-attr]
    if meta["appVersion"] != version or chart.name != f"argus-{meta['version']}.tgz":
        raise Failed(f"{chart.name}: appVersion {meta['appVersion']}, version {meta['version']} (release {version})")
    annotations = meta.get("annotations", {})
    images = yaml.safe_load(annotations.get("artifacthub.io/images", "[]"))
    crds = yaml.safe_load(annotations.get("artifacthub.io/crds", "[]"))
    if not readme.startswith("# Argus chart") or not images or [c["name"] for c in crds] != ["argustasks.argus.io", "argusclusters.argus.io"]:
        raise Failed(f"{chart.name}: no README, or no Artifact Hub images/crds annotations")
    image = images[0]["image"]
    if not image.endswith(f":{version}") or "/" not in image:
        raise Failed(f"{chart.name}: Artifact Hub image {image} is not <registry>/<name>:{version}")

    helm = find_binaries() / "helm"
    home = work / "helm"
    env = {"HELM_CACHE_HOME": str(home / "cache"), "HELM_CONFIG_HOME": str(home / "config"), "HELM_DATA_HOME": str(home / "data"),
           "KUBECONFIG": ""}
    cp = ControlPlane.start(work / "control-plane")
    try:
        kubeconfig = ["--kubeconfig", str(cp.kubeconfig)]
        run(helm, "install", "argus", chart, "--namespace", "argus-system", "--create-namespace", *kubeconfig, env=env)
        manifest = [d for d in yaml.safe_load_all(run(helm, "get", "manifest", "argus", "-n", "argus-system", *kubeconfig, env=env).stdout) if d]
        for obj in manifest:  # each object is on the server, as the API server stored it
            ns = ["-n", obj["metadata"].get("namespace", "argus-system")] if obj["kind"] not in CLUSTER_KINDS else []
            resource = f"{obj['kind']}.{obj['apiVersion'].split('/')[0]}" if "/" in obj["apiVersion"] else obj["kind"]
            got = cp.kubectl("get", resource, obj["metadata"]["name"], *ns, "-o", "name", check=False)
            if got.returncode != 0:
                raise Failed(f"{resource} {obj['metadata']['name']} is not on the API server: {got.stderr.strip()}")
        deployment = json.loads(cp.kubectl("get", "deployment", "argus", "-n", "argus-system", "-o", "json").stdout)
        got = deployment["spec"]["template"]["spec"]["containers"][0]["image"]
        if got != image:
            raise Failed(f"the installed Deployment runs {got}, the chart's Artifact Hub annotation says {image}")
        cp.kubectl("get", "crd", "argustasks.argus.io", "argusclusters.argus.io")
        # The same package rendered and applied server-side, as GitOps tools apply it (a second
        # release; the user ClusterRoles are the first one's, and so is the log API: one
        # release per cluster serves logs.argus.io, docs/logs.md).
        rendered = run(helm, "template", "argus-ssa", chart, "--namespace", "argus-ssa", "--kube-version", KUBE_VERSION,
                       "--set", "rbac.userRoles=false", "--set", "logsApi.enabled=false", env=env).stdout
        cp.kubectl("create", "namespace", "argus-ssa")
        applied = cp.kubectl("apply", "--server-side", "--field-manager=check-release", "-n", "argus-ssa", "-f", "-", input=rendered,
                             check=False)
        if applied.returncode != 0:
            raise Failed(f"kubectl apply --server-side of {chart.name}: {applied.stderr.strip()}")
        ok(f"{chart.name}: helm install into the API server ({len(manifest)} objects created, Deployment image {got}) and "
           f"kubectl apply --server-side of its rendering ({len(applied.stdout.splitlines())} objects); README and Artifact Hub annotations")
    finally:
        cp.stop()


# Kinds the chart may render that live outside namespaces.
CLUSTER_KINDS = {"ClusterRole", "ClusterRoleBinding", "ValidatingWebhookConfiguration", "CustomResourceDefinition", "Namespace",
                 "PriorityClass", "ArgusCluster"}


def check_wheel(folder: Path, version: str, work: Path) -> None:
    wheel = folder / f"argus_operator-{version}-py3-none-any.whl"
    sdist = folder / f"argus_operator-{version}.tar.gz"
    for f in (wheel, sdist):
        if not f.is_file():
            raise Failed(f"{f.name} is missing")
    venv = work / "venv"
    run(sys.executable, "-m", "venv", venv)
    uv = REPO / ".venv" / "bin" / "uv"
    run(uv, "pip", "install", "--quiet", "--python", venv / "bin" / "python", wheel, "-c", REPO / "requirements" / "operator.txt",
        env={"UV_CACHE_DIR": str(CACHE / "uv")})
    for command in ("argus", "argus-operator"):
        out = run(venv / "bin" / command, "--version").stdout.strip()
        if out != f"{command} {version}":
            raise Failed(f"{command} --version printed {out!r}, not '{command} {version}'")
    ok(f"{wheel.name} in a clean venv: argus --version and argus-operator --version print {version}")


def krew_binary() -> Path:
    binary = CACHE / "bin" / f"krew-{KREW_VERSION}" / "krew"
    if not binary.is_file():
        binary.parent.mkdir(parents=True, exist_ok=True)
        run("go", "install", f"{KREW_MODULE}@{KREW_VERSION}", env={"GOBIN": str(binary.parent), "GOFLAGS": "-trimpath -buildvcs=false"},
            timeout=900)
    return binary


def check_krew(folder: Path, version: str, work: Path) -> None:
    manifest_path = folder / "argus.krew.yaml"
    manifest = yaml.safe_load(manifest_path.read_text())
    if manifest["spec"]["version"] != f"v{version}":
        raise Failed(f"argus.krew.yaml: version {manifest['spec']['version']}, release v{version}")
    archives = {Path(p["uri"]).name: p for p in manifest["spec"]["platforms"]}
    if sorted(archives) != sorted(p.name for p in folder.glob(f"kubectl-argus_v{version}_*.tar.gz")):
        raise Failed(f"argus.krew.yaml names {sorted(archives)}, the folder holds others")
    for name, platform in archives.items():
        if hashlib.sha256((folder / name).read_bytes()).hexdigest() != platform["sha256"]:
            raise Failed(f"argus.krew.yaml: sha256 of {name} differs")
    here = f"kubectl-argus_v{version}_linux_amd64.tar.gz"
    if here not in archives:
        raise Failed(f"no archive for this machine ({here})")
    krew = krew_binary()
    root = work / "krew"
    env = {"KREW_ROOT": str(root), "KREW_NO_UPGRADE_CHECK": "1"}
    # A manifest whose sha256 does not match the archive is refused (krew checks it).
    bad = work / "bad.krew.yaml"
    tampered = yaml.safe_load(manifest_path.read_text())
    for platform in tampered["spec"]["platforms"]:
        platform["sha256"] = "0" * 64
    bad.write_text(yaml.safe_dump(tampered))
    refused = run(krew, "install", f"--manifest={bad}", f"--archive={folder / here}", env=env, check=False)
    if refused.returncode == 0:
        raise Failed("krew installed from a manifest whose sha256 is wrong")
    run(krew, "install", f"--manifest={manifest_path}", f"--archive={folder / here}", env=env)
    kubectl = find_kubectl()
    path = {"PATH": f"{root / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    out = run(kubectl, "argus", "--version", env=path).stdout.strip()
    if out != f"kubectl argus {version}":
        raise Failed(f"kubectl argus --version printed {out!r}")
    done = run(kubectl, "argus", "validate", "-f", REPO / "examples" / "ppo-basic.yaml", "--user", "alice", env=path)
    if "ppo-basic: valid" not in done.stdout:
        raise Failed(f"kubectl argus validate: {done.stdout}")
    check_launcher_python_choice(root / "bin" / "kubectl-argus", version, work)
    ok(f"{here} through argus.krew.yaml (krew {KREW_VERSION}, KREW_ROOT {root}): kubectl argus --version, validate; a wrong sha256 is refused")


def check_launcher_python_choice(plugin: Path, version: str, work: Path) -> None:
    """The launcher passes over a python3 it has no compiled packages for (here one that says
    it is CPython 3.9) and runs the python3.X that fits; with none, it names what it needs."""
    only = work / "path-only"
    only.mkdir()
    for tool in ("dirname", "readlink"):
        (only / tool).symlink_to(shutil.which(tool) or f"/usr/bin/{tool}")
    (only / "python3").write_text("#!/bin/sh\necho cp39\n")
    (only / "python3").chmod(0o755)
    refused = run(plugin, "--version", env={"PATH": str(only)}, check=False)
    if refused.returncode != 2 or "needs CPython 3.11, 3.12, 3.13, 3.14" not in refused.stderr:
        raise Failed(f"the launcher with only a CPython 3.9 on PATH: exit {refused.returncode}, {refused.stderr.strip()!r}")
    minor = f"{sys.version_info[0]}.{sys.version_info[1]}"
    (only / f"python{minor}").symlink_to(Path(getattr(sys, "_base_executable", sys.executable)).resolve())
    out = run(plugin, "--version", env={"PATH": str(only)}).stdout.strip()
    if out != f"kubectl argus {version}":
        raise Failed(f"the launcher with python3 = 3.9 and python{minor} on PATH printed {out!r}")


def check_image(folder: Path, version: str, image: str) -> None:
    archive = folder / f"argus-operator-{version}.oci.tar"
    if not archive.is_file():
        print(f"check-release: no image archive (built with --no-image): {archive.name} not checked", flush=True)
        return
    with tarfile.open(archive) as tar:
        names = set(tar.getnames())
        if "oci-layout" not in names and "./oci-layout" not in names:
            raise Failed(f"{archive.name}: not an OCI layout (no oci-layout file)")
        member = "index.json" if "index.json" in names else "./index.json"
        index = json.load(tar.extractfile(member))  # type: ignore[arg-type]
        manifests = index["manifests"]
        refs = [m.get("annotations", {}).get("org.opencontainers.image.ref.name") for m in manifests]
        if len(manifests) != 1 or refs != [image]:
            raise Failed(f"{archive.name}: names {refs}, not [{image!r}]")

        def blob(digest: str) -> dict:
            algo, hexd = digest.split(":")
            name = f"blobs/{algo}/{hexd}"
            return json.load(tar.extractfile(name if name in names else f"./{name}"))  # type: ignore[arg-type]
        config = blob(blob(manifests[0]["digest"])["config"]["digest"])["config"]
    if config.get("Entrypoint") != ["argus-operator"] or config.get("User") != "10001:10001":
        raise Failed(f"{archive.name}: entrypoint {config.get('Entrypoint')}, user {config.get('User')}")
    ok(f"{archive.name}: OCI archive of {image}, entrypoint argus-operator, user 10001")


def check_sbom(folder: Path, version: str) -> None:
    sbom = json.loads((folder / f"argus-operator-{version}.cdx.json").read_text())
    if sbom.get("bomFormat") != "CycloneDX" or sbom.get("specVersion") != "1.6":
        raise Failed(f"SBOM: {sbom.get('bomFormat')} {sbom.get('specVersion')}, not CycloneDX 1.6")
    locked = dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", (REPO / "requirements" / "operator.txt").read_text(), re.M))
    norm = lambda n: re.sub(r"[-_.]+", "-", n).lower()  # noqa: E731
    listed = {norm(c["name"]): c["version"] for c in sbom["components"]}
    if listed != {norm(k): v for k, v in locked.items()}:
        raise Failed(f"SBOM components differ from requirements/operator.txt: {sorted(set(listed.items()) ^ {(norm(k), v) for k, v in locked.items()})}")
    root = sbom["metadata"]["component"]
    if (root["name"], root["version"]) != ("argus-operator", version):
        raise Failed(f"SBOM root component {root['name']} {root['version']}")
    ok(f"argus-operator-{version}.cdx.json: CycloneDX 1.6, the lock's {len(listed)} packages")


def check_license(folder: Path, version: str) -> None:
    """LICENSE and CHANGELOG.md in the folder; the licence in the chart, the wheel and the sdist."""
    text = (folder / "LICENSE").read_text()
    if text != (REPO / "LICENSE").read_text() or "Apache License" not in text or "Version 2.0" not in text:
        raise Failed("LICENSE is not the repository's Apache-2.0 LICENSE")
    first = first_version((folder / "CHANGELOG.md").read_text())
    if first is None or first[0] != version:
        raise Failed(f"CHANGELOG.md's first section is {first and first[0]!r}, not this release's {version}")
    chart = next(folder.glob("argus-*.tgz"))
    with tarfile.open(chart) as tar:
        meta = yaml.safe_load(tar.extractfile("argus/Chart.yaml").read())  # type: ignore[union-attr]
        if tar.extractfile("argus/LICENSE").read().decode() != text:  # type: ignore[union-attr]
            raise Failed(f"{chart.name}: its LICENSE is not the repository's")
    if meta.get("annotations", {}).get("artifacthub.io/license") != "Apache-2.0":
        raise Failed(f"{chart.name}: no artifacthub.io/license: Apache-2.0 annotation")
    import zipfile  # noqa: PLC0415
    wheel = folder / f"argus_operator-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as whl:
        metadata = whl.read(f"argus_operator-{version}.dist-info/METADATA").decode()
        shipped = whl.read(f"argus_operator-{version}.dist-info/licenses/LICENSE").decode()
    if "License-Expression: Apache-2.0" not in metadata.splitlines() or shipped != text:
        raise Failed(f"{wheel.name}: no License-Expression: Apache-2.0, or not the repository's LICENSE")
    with tarfile.open(folder / f"argus_operator-{version}.tar.gz") as tar:
        if tar.extractfile(f"argus_operator-{version}/LICENSE").read().decode() != text:  # type: ignore[union-attr]
            raise Failed(f"argus_operator-{version}.tar.gz: its LICENSE is not the repository's")
    ok(f"Apache-2.0 LICENSE in the folder, the chart, the wheel and the sdist; CHANGELOG.md starts with {first[0]} ({first[1]})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, help="what hack/release.sh printed")
    args = parser.parse_args(argv)
    folder = args.folder.resolve()
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    try:
        check_sums(folder)
        check_license(folder, version)
        chart_image = None
        with tarfile.open(next(folder.glob("argus-*.tgz"))) as tar:
            meta = yaml.safe_load(tar.extractfile("argus/Chart.yaml").read())  # type: ignore[union-attr]
            chart_image = yaml.safe_load(meta["annotations"]["artifacthub.io/images"])[0]["image"]
        check_sbom(folder, version)
        check_image(folder, version, chart_image)
        with tempfile.TemporaryDirectory(prefix="check-release-") as tmp:
            work = Path(tmp)
            check_wheel(folder, version, work)
            check_krew(folder, version, work)
            check_chart(folder, version, work)
    except (Failed, OSError, KeyError, StopIteration, tarfile.TarError, ValueError) as exc:
        print(f"check-release: FAILED: {exc}", file=sys.stderr)
        return 1
    print(f"check-release: {folder} is release {version}, everything installs", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
