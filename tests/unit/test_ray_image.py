"""The Ray worker image's pins (deploy/ray-image/; docs/ray-image.md) against the testbed's
(hack/verl-0.9.1-oracle-constraints.txt, the real verl 0.9.1 environment the tests run) and
against what verl 0.9.1 itself declares (its wheel's METADATA, cached by hack/fetch-verl.sh).
No Docker here: the image is never built in CI; these tests are what holds its recipe."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from verltrees import verl_tree

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
IMAGE = REPO / "deploy" / "ray-image"
TESTBED = REPO / "hack" / "verl-0.9.1-oracle-constraints.txt"
VERL = next(line.split()[0] for line in (REPO / "operator" / "argus" / "verl-releases.txt").read_text().splitlines()
            if line.strip() and not line.startswith("#"))

# Where the GPU image must differ from the testbed, and why (hack/lock-ray-image.sh).
FORCED_BY_VLLM = {
    "torch": "verl[vllm]==0.9.1 and vllm 0.24.0 pin torch==2.11.0",
    "transformers": "verl[vllm]==0.9.1 pins transformers==5.9.0",
    "triton": "torch 2.11.0's own pin",
    "fastapi": "vllm 0.24.0 asks fastapi[standard]<0.137",
    "numpy": "vllm 0.24.0 needs mistral-common, which caps numpy below 2.4",
}


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name.split("[", maxsplit=1)[0]).lower()


def pins(path: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line and not line.startswith("-"):
            name, _, version = line.partition("==")
            assert version, f"{path.name}: {line!r} is not pinned with =="
            out[canonical(name)] = version.strip()
    return out


def forced(name: str) -> bool:
    return name in FORCED_BY_VLLM or name.startswith(("nvidia-", "cuda-"))  # torch's CUDA wheels follow torch


def top_level(path: Path) -> dict[str, str]:
    """requirements.in: name -> its specifier (may be empty)."""
    out = {}
    for line in path.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            m = re.match(r"([A-Za-z0-9_.-]+)(\[[^]]*\])?(.*)", line)
            assert m, line
            out[canonical(m.group(1))] = m.group(3).strip()
    return out


def verl_metadata() -> str:
    return (Path(verl_tree(VERL)) / f"verl-{VERL}.dist-info" / "METADATA").read_text()


def verl_extra(extra: str) -> dict[str, str]:
    """verl's requirements in one extra: name -> specifier."""
    out = {}
    for m in re.finditer(rf'^Requires-Dist: ([A-Za-z0-9_.-]+)(\[[^]]*\])?([^;\n]*); extra == "{extra}"$', verl_metadata(), re.M):
        out[canonical(m.group(1))] = m.group(3).strip()
    return out


def test_the_kind_image_pins_exactly_the_testbeds_versions() -> None:
    kind, testbed = pins(IMAGE / "kind-constraints.txt"), pins(TESTBED)
    assert {n: (v, kind[n]) for n, v in testbed.items() if kind.get(n) != v} == {}
    # and what the testbed's real-verl runs need beyond the oracle (verl-on-cpu.md): main_ppo imports both
    assert kind["verl"] == VERL and kind["transferqueue"] and kind["cachetools"]


def test_the_gpu_image_agrees_with_the_testbed_but_where_vllm_forces_otherwise() -> None:
    image, testbed = pins(IMAGE / "constraints.txt"), pins(TESTBED)
    both = image.keys() & testbed.keys()
    assert {"ray", "torch", "transformers", "hydra-core", "omegaconf", "tensordict", "pyarrow", "tokenizers"} <= both
    differ = {n for n in both if image[n] != testbed[n]}
    assert {n for n in differ if not forced(n)} == set(), "pinned apart from the testbed without a reason"
    assert set(FORCED_BY_VLLM) <= differ, f"no longer forced apart: {sorted(set(FORCED_BY_VLLM) - differ)} (drop it from FORCED_BY_VLLM)"
    assert not testbed.keys() - image.keys(), "the image lacks packages of the testbed's environment"


@pytest.mark.parametrize("constraints", ["constraints.txt", "kind-constraints.txt"])
def test_every_image_pins_ray_and_verl_as_argus_uses_them_and_what_verl_does_not_declare(constraints: str) -> None:
    image = pins(IMAGE / constraints)
    operator_ray = re.search(r"^ray==([^ \\\n]+)", (REPO / "requirements" / "operator.txt").read_text(), re.M)
    assert operator_ray and image["ray"] == operator_ray.group(1) == "2.60.0"
    assert image["verl"] == VERL
    for name in ("transferqueue", "cachetools", "hydra-core", "omegaconf", "pyarrow", "uvicorn", "fastapi", "torch", "transformers"):
        assert name in image, f"{constraints} lacks {name}"


def test_transfer_queue_is_named_as_verls_metadata_names_it() -> None:
    core = verl_extra("verl-core")
    assert "transferqueue" in core and "cachetools" in core
    for req in ("requirements.in", "kind-requirements.in"):
        assert "transferqueue" in top_level(IMAGE / req) and "cachetools" in top_level(IMAGE / req)


def test_the_gpu_image_takes_torch_vllm_and_transformers_at_verls_own_vllm_extra() -> None:
    extra, image = verl_extra("vllm"), pins(IMAGE / "constraints.txt")
    for name in ("torch", "vllm", "transformers"):
        assert extra[name] == f"=={image[name]}", (name, extra[name], image[name])
    assert top_level(IMAGE / "requirements.in")["verl"] == f"=={VERL}"
    # verl's own bounds on the rest (Requires-Dist without an extra)
    tensordict = re.search(r"^Requires-Dist: tensordict(\S+)$", verl_metadata(), re.M)
    assert tensordict and image["tensordict"] in ("0.8.0", "0.9.1", "0.10.0") and "<=0.10.0" in tensordict.group(1)


def test_the_dockerfile_builds_from_rays_image_and_puts_python_on_the_login_path() -> None:
    text = (IMAGE / "Dockerfile").read_text()
    assert "ARG BASE_IMAGE=rayproject/ray:2.60.0-py311-gpu" in text
    assert "COPY deploy/ray-image/argus-path.sh /etc/profile.d/argus-path.sh" in text
    profile = (IMAGE / "argus-path.sh").read_text()
    assert 'export PATH="/home/ray/anaconda3/bin:$PATH"' in profile
    assert "ARG PYTHON=/home/ray/anaconda3/bin/python" in text
    for name in ("requirements.in", "constraints.txt", "kind-requirements.in", "kind-constraints.txt"):
        assert f"deploy/ray-image/{name}" in text
    # the build itself fails when a login shell would not find python3/torchrun or verl would not import
    assert "command -v torchrun" in text and "import ray, verl, torch" in text


def test_the_build_context_lets_the_recipe_in() -> None:
    """The repository's .dockerignore keeps everything out but what is named: the recipe's folder is."""
    lines = (REPO / ".dockerignore").read_text().splitlines()
    assert "*" in lines and "!deploy/ray-image/" in lines
