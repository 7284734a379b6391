"""Install the repository's top-level folders under one import name: ``worldtrace.<folder>``.

The folders stay where the design puts them (``schemas/``, ``collectors/`` …); this maps each
of them to a subpackage of ``worldtrace`` so the project claims no generic top-level names.
Every top-level folder with an ``__init__.py`` is a layer, found here rather than listed, so a
new layer needs no change to this file. Everything else about the project is in
``pyproject.toml``.
"""

from pathlib import Path

from setuptools import find_packages, setup

ROOT = Path(__file__).parent
NOT_INSTALLED = {"tests", "benchmarks", "worldtrace"}
LAYERS = sorted(
    path.name
    for path in ROOT.iterdir()
    if (path / "__init__.py").is_file() and path.name not in NOT_INSTALLED
)

setup(
    packages=[
        "worldtrace",
        *(
            f"worldtrace.{name}"
            for name in find_packages(
                where=str(ROOT), include=[*LAYERS, *(f"{n}.*" for n in LAYERS)]
            )
        ),
    ],
    package_dir={"worldtrace": "worldtrace", **{f"worldtrace.{name}": name for name in LAYERS}},
)
