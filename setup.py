"""The wheel carries the project's hardware specs: ``hardware/`` (the place people edit) is copied
into ``perfmodel/data/hardware/`` at build time, so an installed perfmodel is whole; and its
bytecode, so that a process never compiles perfmodel's modules where an installer wrote none
(``pip install --no-compile``, a read-only site-packages): about 70 ms of CPU of a ``perfmodel predict``
on a loaded 2-core machine. Everything else is in pyproject.toml."""

import py_compile
from importlib.util import cache_from_source
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent


class BuildPyWithHardware(build_py):
    def run(self) -> None:
        super().run()
        if self.editable_mode:          # an editable install reads ``hardware/`` in place
            return
        target = Path(self.build_lib) / "perfmodel" / "data" / "hardware"
        self.mkpath(str(target))
        for spec in sorted((ROOT / "hardware").glob("*.yaml")):
            self.copy_file(str(spec), str(target / spec.name))
        for module in self._compiled():
            # checked against a hash of the source, not its time stamp: valid whatever times the
            # installer gives the files, recompiled if the source is edited (PEP 552)
            py_compile.compile(module, cache_from_source(module), doraise=True,
                               invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH)

    def _compiled(self) -> list:
        return [str(p) for pkg in ("perfmodel", "calibration") for p in sorted((Path(self.build_lib) / pkg).rglob("*.py"))]

    def get_outputs(self, include_bytecode=True):
        shipped = [str(Path(self.build_lib) / "perfmodel" / "data" / "hardware" / p.name)
                   for p in sorted((ROOT / "hardware").glob("*.yaml"))]
        if self.editable_mode:
            return super().get_outputs(include_bytecode)
        return super().get_outputs(include_bytecode) + shipped + [cache_from_source(m) for m in self._compiled()]


setup(cmdclass={"build_py": BuildPyWithHardware})
