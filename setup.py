"""Package layout that pyproject.toml cannot express on its own.

The design fixes the folders `global/` (the Global server) and `migrations/` (the alembic
chain). `global` is a Python keyword, so the folder is installed as the package
`volcano_global`, and the migrations ship inside it as `volcano_global.migrations` so an
installed server (wheel, container image) can migrate its database without the source tree.
"""

from setuptools import find_packages, setup

server = ["volcano_global"] + [f"volcano_global.{p}" for p in find_packages("global")]
migrations = ["volcano_global.migrations"] + [
    f"volcano_global.migrations.{p}" for p in find_packages("migrations")
]

setup(
    packages=server + migrations + find_packages(include=["core_agent", "core_agent.*"]),
    package_dir={"volcano_global": "global", "volcano_global.migrations": "migrations"},
    package_data={
        "volcano_global.migrations": ["script.py.mako"],
        "volcano_global.rpc.v1": ["*.pyi"],
        "volcano_global.console": ["static/*"],
        "volcano_global.simulation": ["data/*.csv"],
        "volcano_global.clusterspec": ["data/*.csv"],
        "volcano_global.api.kube": ["crds/*.yaml", "crds/README.md"],
    },
)
