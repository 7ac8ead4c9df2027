"""Build the wheel and sdist of every released package, then `twine check` them.

    python tools/build_dists.py [--out-dir dist]

Checks first that the packages agree on one version (`check_versions.py`),
then builds each package with `uv build` (the sdist, then the wheel from the
sdist, so a file missing from the sdist fails here) and runs
`twine check --strict` on everything built. Needs `uv`, `twine` and
`packaging` (``pip install uv twine packaging``); `tox -e dist` installs them.
Exits non-zero on the first failure.
"""

from __future__ import annotations

import argparse
import pathlib
import subprocess
import sys

import check_versions

ROOT = pathlib.Path(__file__).resolve().parents[1]


def build(out_dir: pathlib.Path, root: pathlib.Path = ROOT) -> list[pathlib.Path]:
    """Builds every released package into `out_dir` and checks the files.

    Returns:
      The built files (one wheel and one sdist per package), sorted.

    Raises:
      SystemExit: If the versions disagree.
      subprocess.CalledProcessError: If a build or `twine check` fails.
    """
    packages = [
        check_versions.read_package(root, folder, module)
        for folder, module in check_versions.PACKAGES.items()
    ]
    problems = check_versions.disagreements(packages)
    if problems:
        raise SystemExit("Versions disagree, nothing built:\n" + "\n".join(problems))
    out_dir.mkdir(parents=True, exist_ok=True)
    for package in packages:
        stale = [*out_dir.glob(f"{_file_stem(package.name)}-*")]
        for path in stale:
            path.unlink()
        print(f"building {package.name} {package.version}", flush=True)
        command = [sys.executable, "-m", "uv", "build", "--quiet", "--out-dir", str(out_dir)]
        subprocess.run([*command, str(root / package.folder)], check=True)
    built = sorted(
        path
        for package in packages
        for path in out_dir.glob(f"{_file_stem(package.name)}-{package.version}*")
    )
    subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", *map(str, built)], check=True
    )
    return built


def _file_stem(name: str) -> str:
    """The distribution name as wheel and sdist file names spell it."""
    return name.replace("-", "_")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out-dir",
        type=pathlib.Path,
        default=ROOT / "dist",
        help="where to write the files (default: dist/ in the checkout)",
    )
    args = parser.parse_args(argv)
    built = build(args.out_dir.resolve())
    print(f"{len(built)} files in {args.out_dir}:")
    for path in built:
        print(f"  {path.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
