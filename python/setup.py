"""Records where the cnnc build (compiler, runtime, reference library) is.

`pip install ./python` writes cnnc/_install_config.py into the installed
package with the build directory: $CNNC_BUILD_DIR, else <repo>/build next to
this file. At run time $CNNC_BUILD_DIR still takes precedence.
"""
import os

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


class BuildPyRecordingBuildDir(build_py):
    def run(self):
        super().run()
        build_dir = os.environ.get("CNNC_BUILD_DIR") or os.path.join(
            os.path.dirname(HERE), "build")
        target = os.path.join(self.build_lib, "cnnc", "_install_config.py")
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "w") as f:
            f.write('"""Written by setup.py at install time."""\n')
            f.write("BUILD_DIR = %r\n" % os.path.abspath(build_dir))


setup(cmdclass={"build_py": BuildPyRecordingBuildDir})
