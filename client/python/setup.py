"""Builds tandem-client: before the Python files are copied, grpcio-tools
generates the tandem.v1 messages and stubs from the repository's proto/
(TANDEM_PROTO_DIR overrides where) into the package as tandem_client.v1,
with their imports of one another rewritten to that package. Nothing of an
earlier build in the same build directory survives (no stale stub or module)."""
import os
import pathlib
import re
import shutil
import tempfile

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = pathlib.Path(__file__).resolve().parent
PROTO_DIR = pathlib.Path(os.environ.get("TANDEM_PROTO_DIR", HERE.parent.parent / "proto"))
PROTOS = ["common.proto", "inference.proto"]


def generate(out_root):
    """tandem_client/v1/ under out_root: the messages and stubs of PROTOS."""
    if not (PROTO_DIR / "tandem/v1/inference.proto").exists():
        raise SystemExit(f"tandem-client: no tandem/v1/inference.proto under {PROTO_DIR}; "
                         "build from the repository or set TANDEM_PROTO_DIR")
    out = pathlib.Path(out_root) / "tandem_client" / "v1"
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:  # not in out_root: the wheel takes all of it
        protoc_into(pathlib.Path(tmp), out)
    (out / "__init__.py").write_text('"""Generated from proto/tandem/v1 by grpcio-tools."""\n')


def protoc_into(tmp, out):
    """protoc's Python output of PROTOS in tmp, then copied to out with the
    imports rewritten."""
    from grpc_tools import protoc

    include = pathlib.Path(protoc.__file__).parent / "_proto"
    for name in PROTOS:
        args = ["protoc", f"-I{PROTO_DIR}", f"-I{include}", f"--python_out={tmp}",
                f"--grpc_python_out={tmp}", str(PROTO_DIR / "tandem/v1" / name)]
        if protoc.main(args) != 0:
            raise SystemExit(f"tandem-client: protoc failed on {name}")
    for f in (tmp / "tandem" / "v1").glob("*.py"):
        text = re.sub(r"^from tandem\.v1 import", "from tandem_client.v1 import",
                      f.read_text(), flags=re.M)
        (out / f.name).write_text(text)


class BuildWithStubs(build_py):
    def run(self):
        shutil.rmtree(pathlib.Path(self.build_lib) / "tandem_client", ignore_errors=True)
        shutil.rmtree(pathlib.Path(self.build_lib) / "_protoc", ignore_errors=True)  # older builds
        generate(self.build_lib)
        super().run()


setup(cmdclass={"build_py": BuildWithStubs})
