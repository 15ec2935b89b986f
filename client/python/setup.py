"""Builds tandem-client: before the Python files are copied, grpcio-tools
generates the tandem.v1 messages and stubs from the repository's proto/
(TANDEM_PROTO_DIR overrides where) into the package as tandem_client.v1,
with their imports of one another rewritten to that package."""
import os
import pathlib
import re

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = pathlib.Path(__file__).resolve().parent
PROTO_DIR = pathlib.Path(os.environ.get("TANDEM_PROTO_DIR", HERE.parent.parent / "proto"))
PROTOS = ["common.proto", "inference.proto"]


def generate(out_root):
    from grpc_tools import protoc

    if not (PROTO_DIR / "tandem/v1/inference.proto").exists():
        raise SystemExit(f"tandem-client: no tandem/v1/inference.proto under {PROTO_DIR}; "
                         "build from the repository or set TANDEM_PROTO_DIR")
    out = pathlib.Path(out_root) / "tandem_client" / "v1"
    out.mkdir(parents=True, exist_ok=True)
    tmp = pathlib.Path(out_root) / "_protoc"
    tmp.mkdir(parents=True, exist_ok=True)
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
    (out / "__init__.py").write_text('"""Generated from proto/tandem/v1 by grpcio-tools."""\n')


class BuildWithStubs(build_py):
    def run(self):
        generate(self.build_lib)
        super().run()


setup(cmdclass={"build_py": BuildWithStubs})
