"""The wheel carries the project's hardware specs: ``hardware/`` (the place people edit) is copied
into ``perfmodel/data/hardware/`` at build time, so an installed perfmodel is whole. Everything
else is in pyproject.toml."""

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

    def get_outputs(self, include_bytecode=True):
        shipped = [str(Path(self.build_lib) / "perfmodel" / "data" / "hardware" / p.name)
                   for p in sorted((ROOT / "hardware").glob("*.yaml"))]
        return super().get_outputs(include_bytecode) + ([] if self.editable_mode else shipped)


setup(cmdclass={"build_py": BuildPyWithHardware})
