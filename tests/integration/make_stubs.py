#!/usr/bin/env python3
"""Generates the Python messages and gRPC stubs of proto/tandem/v1/*.proto with
grpcio-tools' protoc into OUT_DIR (a fresh tree: tandem/v1/*_pb2.py,
*_pb2_grpc.py), then imports them, so a proto that this protobuf runtime
cannot load fails here rather than in every test. The integration tests find
them through PYTHONPATH=OUT_DIR; grpc.health.v1 comes from the
grpcio-health-checking package (grpc_health.v1), not from proto/.

Usage: make_stubs.py PROTO_DIR OUT_DIR   (run by CTest's python_stubs fixture)
"""
import glob
import importlib
import os
import shutil
import sys

from grpc_tools import protoc

def main(proto_dir, out_dir):
    generated = os.path.join(out_dir, "tandem")
    shutil.rmtree(generated, ignore_errors=True)  # no stub of a deleted proto survives
    os.makedirs(out_dir, exist_ok=True)
    sources = sorted(glob.glob(os.path.join(proto_dir, "tandem", "v1", "*.proto")))
    if not sources:
        sys.exit(f"make_stubs: no .proto file in {proto_dir}/tandem/v1")
    names = [os.path.basename(path)[:-len(".proto")] for path in sources]
    code = protoc.main(["grpc_tools.protoc", f"--proto_path={proto_dir}",
                        f"--python_out={out_dir}", f"--grpc_python_out={out_dir}", *sources])
    if code != 0:
        sys.exit(f"make_stubs: protoc exited {code} on {sources}")
    sys.path.insert(0, out_dir)
    for name in names:
        importlib.import_module(f"tandem.v1.{name}_pb2")
        importlib.import_module(f"tandem.v1.{name}_pb2_grpc")
    importlib.import_module("grpc_health.v1.health_pb2_grpc")
    print(f"make_stubs: tandem.v1 {', '.join(names)} in {out_dir}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
