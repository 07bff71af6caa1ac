"""``functions.runtime.skip_pydantic_v1_checks`` patches two helpers of FastAPI's private
``fastapi._compat.shared`` (and ``fastapi.encoders``' import of one), which is why FastAPI's
range is bounded, the same in pyproject.toml and requirements-lambda-http.txt. These fail
when a FastAPI release moves those names, changes what they answer, or no longer imports
``pydantic.v1`` while building routes (then the patch buys nothing: remove it)."""

from __future__ import annotations

import tomllib
from importlib import metadata

import pytest
from packaging.requirements import Requirement

from tests.kit import ROOT, run_fresh

CHECKS = ("is_pydantic_v1_model_class", "is_pydantic_v1_model_instance")


def _fastapi(requirements: list[str]) -> Requirement:
    (line,) = [r for r in map(Requirement, requirements) if r.name == "fastapi"]
    return line


def test_fastapi_is_bounded_alike_and_installed_inside_the_bound() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    ours = _fastapi(pyproject["project"]["optional-dependencies"]["server"])
    lines = (ROOT / "requirements-lambda-http.txt").read_text().splitlines()
    lambda_ = _fastapi([ln.split("#", 1)[0].strip() for ln in lines if ln.strip()[:1].isalpha()])
    assert ours.specifier == lambda_.specifier
    assert any(s.operator == "<" for s in ours.specifier), "an upper bound: the patch is private"
    assert ours.specifier.contains(metadata.version("fastapi"))


def test_the_patched_names_are_where_the_patch_expects_them() -> None:
    from fastapi import encoders
    from fastapi._compat import shared

    from functions.runtime import skip_pydantic_v1_checks

    skip_pydantic_v1_checks()  # idempotent: wraps once, whatever ran before in this process
    for name in CHECKS:
        assert getattr(getattr(shared, name, None), "acmi_lean", False), f"{name} moved"
    # encoders imports the instance check by name: the patch must replace its copy too
    assert getattr(encoders.is_pydantic_v1_model_instance, "acmi_lean", False)


# A fresh interpreter: FastAPI's own checks kept aside, an HTTP function's routes built with
# or without the patch (was pydantic.v1 imported?), then what the checks answer on models.
PROBE = """
import json, sys, warnings
from fastapi._compat import shared
originals = {name: getattr(shared, name) for name in sys.argv[2:]}
import functions.runtime as runtime
if sys.argv[1] == "unpatched":
    runtime.skip_pydantic_v1_checks = lambda: None
import functions.entities
functions.entities.handler.warm()
v1_imported = "pydantic.v1" in sys.modules
from pydantic import BaseModel
with warnings.catch_warnings():
    warnings.simplefilter("ignore", UserWarning)
    from pydantic import v1
class Legacy(v1.BaseModel):
    x: int
class Current(BaseModel):
    x: int
samples = {"v1 class": Legacy, "v1 instance": Legacy(x=1), "class": Current,
           "instance": Current(x=1), "int": int}
answers = {
    kind: {name: {label: check(obj) for label, obj in samples.items()} for name, check in checks}
    for kind, checks in (("fastapi", originals.items()),
                         ("ours", [(n, getattr(shared, n)) for n in originals]))
}
print(json.dumps({"v1": v1_imported, "answers": answers}))
"""
ENV = {
    "UPSTASH_REDIS_REST_URL": "https://eu1-compat-otter-12345.upstash.io",
    "UPSTASH_REDIS_REST_TOKEN": "not-a-real-token",
}
MEANING = {
    "is_pydantic_v1_model_class": {
        "v1 class": True,
        "v1 instance": False,
        "class": False,
        "instance": False,
        "int": False,
    },
    "is_pydantic_v1_model_instance": {
        "v1 class": False,
        "v1 instance": True,
        "class": False,
        "instance": False,
        "int": False,
    },
}


@pytest.mark.slow  # fresh interpreters
def test_the_checks_mean_what_the_patch_assumes_and_still_cost_an_import() -> None:
    patched = run_fresh(PROBE, ENV, "patched", *CHECKS)
    assert patched["v1"] is False
    # FastAPI's checks answer as the patch assumes; ours give the same answers once v1 is in
    assert patched["answers"] == {"fastapi": MEANING, "ours": MEANING}
    unpatched = run_fresh(PROBE, ENV, "unpatched", *CHECKS)
    assert unpatched["v1"] is True, (
        "FastAPI no longer imports pydantic.v1 while building routes: "
        "remove skip_pydantic_v1_checks and the bound on FastAPI"
    )
    assert unpatched["answers"]["fastapi"] == MEANING
