"""The pure core does no I/O and the package is layered: import-linter's contracts from
pyproject.toml are kept, every module has its layer, and importing the core loads neither
kopf, kubernetes nor ray. (The one unit test module that starts processes: lint-imports and
a clean interpreter.)"""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"
IO_PACKAGES = ["kopf", "kubernetes", "ray", "aiohttp", "requests", "argus.controller", "argus_testbed", "argus.cli"]


def _pyproject_config() -> dict[str, Any]:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]


def _normalised(config: dict[str, Any]) -> dict[str, Any]:
    """The pyproject contract with two spellings import-linter 2 refuses made valid:
    ``include_external_packages`` belongs to the top level, not to a contract, and a
    forbidden external module must be a top-level package (``urllib``, not
    ``urllib.request``). The contract's intent is unchanged."""
    config = json.loads(json.dumps(config))
    root_packages = set(config.get("root_packages") or [config.get("root_package")])
    for contract in config["contracts"]:
        if contract.pop("include_external_packages", False):
            config["include_external_packages"] = True
        if "forbidden_modules" not in contract:
            continue
        forbidden = []
        for module in contract["forbidden_modules"]:
            top = module.split(".")[0]
            module = module if top in root_packages else top
            if module not in forbidden:
                forbidden.append(module)
        contract["forbidden_modules"] = forbidden
    return config


def _toml(config: dict[str, Any]) -> str:
    """Just enough TOML for an import-linter configuration."""
    def value(v: Any) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        return json.dumps(v)

    lines = ["[tool.importlinter]"]
    lines += [f"{k} = {value(v)}" for k, v in config.items() if k != "contracts"]
    for contract in config["contracts"]:
        lines += ["", "[[tool.importlinter.contracts]]"] + [f"{k} = {value(v)}" for k, v in contract.items()]
    return "\n".join(lines) + "\n"


def _lint(*args: str) -> subprocess.CompletedProcess[str]:
    assert LINT_IMPORTS.exists(), f"{LINT_IMPORTS} not found: install the test extras (pip install -e '.[test]')"
    return subprocess.run([str(LINT_IMPORTS), *args, "--no-cache"], cwd=REPO, capture_output=True, text=True, timeout=120)


def _contract(kind: str, name: str = "") -> dict[str, Any]:
    (contract,) = [c for c in _pyproject_config()["contracts"] if c["type"] == kind and c["name"].startswith(name)]
    return contract


def _package_layers() -> dict[str, Any]:
    return _contract("layers", "Layers:")


def test_the_contract_names_the_io_packages() -> None:
    contract = _contract("forbidden", "The pure core")
    assert contract["source_modules"] == ["argus.core"]
    assert {"kopf", "kubernetes", "ray", "argus.controller", "argus_testbed", "argus.cli"} <= set(contract["forbidden_modules"])


def test_the_lifecycle_contract_names_the_lifecycle_and_the_command_language(tmp_path: Path) -> None:
    """The lifecycle's modules may not import what builds plans; the same contract with the
    plan's builder as its source is broken (negative control)."""
    contract = _contract("forbidden", "The lifecycle")
    assert {"argus.core.lifecycle", "argus.core.transitions", "argus.core.observations", "argus.core.taskstate",
            "argus.core.submission", "argus.core.conditions"} <= set(contract["source_modules"])
    assert {"argus.core.plan", "argus.core.command", "argus.core.verlconfig", "argus.core.template"} <= set(contract["forbidden_modules"])
    config = _normalised(_pyproject_config())
    config["contracts"] = [dict(contract, source_modules=["argus.core.plan"], forbidden_modules=["argus.core.command"])]
    path = tmp_path / "builder.toml"
    path.write_text(_toml(config))
    result = _lint(str(path))
    assert result.returncode != 0 and "BROKEN" in result.stdout, result.stdout + result.stderr


def test_the_control_loop_reaches_kubernetes_only_through_its_ports() -> None:
    """The API server's refusals reach the controller as core.store's StoreError: it imports
    neither the kubernetes client nor kopf (as core.rayjobs keeps Ray's errors out)."""
    contract = _contract("forbidden", "The control loop")
    assert contract["source_modules"] == ["argus.controller"]
    assert {"kopf", "kubernetes"} <= set(contract["forbidden_modules"])


def test_import_contract_is_kept(tmp_path: Path) -> None:
    config = tmp_path / "importlinter.toml"
    config.write_text(_toml(_normalised(_pyproject_config())))
    result = _lint(str(config))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "KEPT" in result.stdout and "0 broken" in result.stdout


def test_the_contract_would_catch_a_violation(tmp_path: Path) -> None:
    """Negative control: the same check on a module that does import what it forbids."""
    config = _normalised(_pyproject_config())
    config["contracts"] = [{"name": "control", "type": "forbidden", "source_modules": ["argus.cli"], "forbidden_modules": ["argus.core", "yaml"]}]
    path = tmp_path / "control.toml"
    path.write_text(_toml(config))
    result = _lint(str(path))
    assert result.returncode != 0 and "BROKEN" in result.stdout, result.stdout + result.stderr


def _layer_modules(layer: str) -> list[str]:
    return [m.strip() for m in layer.replace(":", "|").split("|")]


def test_every_module_has_a_layer_and_core_is_the_lowest() -> None:
    """The package-wide layers name every top-level module and folder; the rooms with their
    own layers contract (the control loop, the process host) name every module they hold."""
    layers = _package_layers()["layers"]
    assert layers[-2:] == ["argus.adapters", "argus.core"]
    named = {m for layer in layers for m in _layer_modules(layer)}
    package = REPO / "operator" / "argus"
    top = {"argus." + p.relative_to(package).parts[0].removesuffix(".py") for p in package.rglob("*.py")} - {"argus.__init__"}
    assert top - named == set(), "modules or folders without a layer in pyproject.toml's package layers contract"
    assert named - top == set(), "layers naming modules that do not exist"
    for room, contract in (("controller", "The control loop"), ("host", "The process host")):
        inner = {m for layer in _contract("layers", contract)["layers"] for m in _layer_modules(layer)}
        modules = {f"argus.{room}.{p.stem}" for p in (package / room).glob("*.py") if p.stem != "__init__"}
        assert modules == inner, f"argus.{room}: every module in its layers contract, and only those"


def test_the_layers_would_catch_an_upward_import(tmp_path: Path) -> None:
    """Negative control: the same layers upside down are broken."""
    config = _normalised(_pyproject_config())
    layers = _package_layers()
    config["contracts"] = [dict(layers, layers=list(reversed(layers["layers"])))]
    path = tmp_path / "upside-down.toml"
    path.write_text(_toml(config))
    result = _lint(str(path))
    assert result.returncode != 0 and "BROKEN" in result.stdout, result.stdout + result.stderr


def test_pyproject_configuration_runs_as_written() -> None:
    result = _lint()
    assert result.returncode == 0, result.stdout + result.stderr


def test_importing_the_core_loads_no_io_package() -> None:
    code = (
        "import importlib, json, pkgutil, sys\n"
        "import argus.core\n"
        "names = sorted('argus.core.' + m.name for m in pkgutil.iter_modules(argus.core.__path__))\n"
        "for name in names: importlib.import_module(name)\n"
        "from argus.core.command.hydra import hydra_override\n"
        "assert hydra_override('a=[1]')[3] == [1]  # Hydra's parser loaded and used\n"
        f"bad = sorted(m for m in sys.modules if any(m == p or m.startswith(p + '.') for p in {IO_PACKAGES!r}))\n"
        "print(json.dumps({'modules': names, 'bad': bad}))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert {"argus.core.plan", "argus.core.policy", "argus.core.expand", "argus.core.command"} <= set(report["modules"])
    assert report["bad"] == [], "the pure core pulled in I/O packages"


def test_importing_the_plan_alone_loads_no_io_package() -> None:
    code = "import sys, argus.core.plan; print(sorted(m for m in ('kopf', 'kubernetes', 'ray') if m in sys.modules))"
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_the_testbed_is_not_part_of_the_product() -> None:
    """The operator's wheel and image hold the package ``argus`` only: the testbed (which
    starts kube-apiserver, etcd and Ray) is a project of its own under tests/testbed."""
    from setuptools import find_packages
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    shipped = find_packages(where=str(REPO / config["where"][0]), include=config["include"])
    assert "argus" in shipped and "argus.core" in shipped
    assert not [p for p in shipped if "testbed" in p], shipped
    assert not (REPO / "operator" / "argus" / "testbed").exists()
    assert (REPO / "tests" / "testbed" / "argus_testbed" / "controlplane.py").is_file()


def test_the_operators_entry_point_imports_no_kubernetes_client_before_it_runs() -> None:
    """The kubernetes client reads KUBECONFIG once, when it is imported; ``argus-operator
    --kubeconfig`` sets it first, so nothing the entry point imports at module level may
    import the client (or kopf, which imports it). A module-level import of it in a settings
    module made kopf's login look for ~/.kube/config instead of the flag's file."""
    code = ("import sys, argus.host.main, argus.controller.settings, argus.servers.webhook.settings, argus.servers.webhook.context, "
            "argus.servers.logapi.settings; "
            "print(sorted(m for m in ('kubernetes', 'kopf') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
